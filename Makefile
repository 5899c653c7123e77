# The two set-up commands of the README: `make run` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test check docs soak fuzz lint clean kafka-up kafka-down bench

$(BIN)/.installed: pyproject.toml setup.py stream_perceptron/_speedups.c stream_perceptron/_dense.c \
  stream_perceptron/_rules.h \
  stream_perceptron/_features.c stream_perceptron/_drift.c
	PYTHON=$(PYTHON) scripts/install-build-deps.sh
	$(PYTHON) -m venv $(VENV)
	scripts/install-venv.sh $(VENV) -e '.[test,rdkafka,docs]'
	$(BIN)/python scripts/compile_bytecode.py
	$(BIN)/python scripts/check_extensions.py
	touch $@

# The main job on its embedded default: River's bundled Phishing data set, written as CSV by
# the project, piped through `stream-perceptron run` on stdin; twice: the plain perceptron, then
# the recommended setting (averaged, features standardised online); their accuracies side by side.
RUN_BEST := --averaged --scale standard
run: $(BIN)/.installed
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(BIN)/stream-perceptron example-data phishing --format csv \
	  | $(BIN)/stream-perceptron run --format csv --label y --progress \
	    --summary-json "$$tmp/plain.json" && \
	$(BIN)/stream-perceptron example-data phishing --format csv \
	  | $(BIN)/stream-perceptron run --format csv --label y --progress $(RUN_BEST) \
	    --summary-json "$$tmp/best.json" && \
	$(BIN)/python scripts/side_by_side.py "Phishing" \
	  "plain perceptron (stream-perceptron run)=$$tmp/plain.json" \
	  "averaged + scaled (run $(RUN_BEST))=$$tmp/best.json"

# Installs what is missing (venv, Python packages, Debian packages), then lints (ruff), type-checks
# (mypy), fetches the Kafka broker's jars (Maven Central, cached in ~/.m2) and runs every test:
# those against a real Kafka broker (started on 127.0.0.1 by the first test that needs it,
# stopped at the end), Prometheus, Pushgateway and Chromium, and the
# learner and C-tier tests on a newer Python too (tests/test_newer_python.py: 3.13, else 3.12,
# from pyenv). The tests run on TEST_WORKERS processes (pytest-xdist): most of a broker test's
# time is waiting on the broker, so 5 share this 2-core machine's CPU well (fresh clones of
# 171ca81: 743-772 s at 4, both cores 88-92 % busy, stretches at 35-80 % while all four
# waited in broker tests; 699 s at 5). Bytecode may be
# cached, as in `make check` (see there). The type check (mypy, 17 s on one core) runs beside
# the tests rather than before them, at the lowest priority (nice 19: it takes the CPU that
# waiting tests leave idle, not the tests' own), its report printed after theirs: either
# failing fails make test. The slowest tests start first, spread over the processes
# (tests/slow_first.py).
TEST_WORKERS ?= 5
test: $(BIN)/.installed
	$(BIN)/python scripts/check_extensions.py
	scripts/install-system-deps.sh
	$(BIN)/ruff check .
	KAFKA_FETCH_ONLY=1 kafka/kafka-up.sh
	@echo "mypy (beside the tests; its report follows theirs)"
	@log=$$(mktemp); nice -n 19 $(BIN)/mypy > "$$log" 2>&1 & types=$$!; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal \
	  --durations=30; tests=$$?; \
	wait $$types; typed=$$?; echo "mypy:"; cat "$$log"; rm -f "$$log"; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The quick loop of a contributor: lint, types and every test that needs no broker, browser,
# Prometheus server or newer Python (the markers of tests/needs.py), on CHECK_WORKERS processes.
# These tests are mostly CPU-bound (no broker to wait on), about 237 s of CPU on 2 cores, but
# some wait (a 20 s outage, a kill -9 loop, subprocesses' starts), and a fourth process keeps
# the cores busy through those waits: measured on an idle machine, `make check` took 123.6 and
# 123.6 s at 4 (CPU 241 and 238 s) against 129.8 and 131.8 s at 3 (235 and 239 s), session 36.
# (Session 35, beside another session's soak, had 3 ahead: 258 s of CPU at -n 3, 273 at -n 4.)
# PYTHONDONTWRITEBYTECODE emptied: pytest then keeps its rewritten test modules and Python the
# package's bytecode (__pycache__, git-ignored), so each process no longer compiles the suite
# anew: `pytest --collect-only` 5.9 -> 3.3 s of CPU; the 3 workers' start and collection
# 17 -> 8 s of CPU in all (with it set, as in some sandboxes, every run paid it again).
CHECK_WORKERS ?= 4
NO_PARTS := not kafka and not browser and not services and not newer_python
check: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(CHECK_WORKERS) --dist worksteal \
	  -m "$(NO_PARTS)" --durations=10

# The documentation site (mkdocs, Material theme, the API reference from the docstrings) into
# site/, strict: a broken link, a missing page or a docstring it cannot read fails the build.
# make test builds it too (tests/docs/test_docs_site.py), so a docs change that breaks it is red there.
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# One test (or file, folder, `-m kafka`) N times in a row beside two busy-loop CPU hogs:
# passes and the slowest run per test; every run's log kept under .soak/. It installs what
# make test installs first (a soak on a new machine once ran without kcat: its test failed).
# make soak TEST=tests/kafka/test_shared_model.py::test_worker_metrics N=10 [PYTEST_ARGS="-n 2"]
N ?= 10
soak: $(BIN)/.installed
	@[ -n "$(TEST)" ] || { echo 'usage: make soak TEST=path::name [N=10] [PYTEST_ARGS=...]' >&2; exit 2; }
	scripts/install-system-deps.sh
	KAFKA_FETCH_ONLY=1 kafka/kafka-up.sh
	$(BIN)/python scripts/soak.py --runs $(N) --pytest-args="$(PYTEST_ARGS)" "$(TEST)"

# The block path against the record path, byte for byte, on CONFIGS random configurations
# (seeds from START); make test runs 2,000 of them.  make fuzz CONFIGS=10000 [START=0]
CONFIGS ?= 10000
START ?= 0
fuzz: $(BIN)/.installed
	STREAM_PERCEPTRON_FUZZ_CONFIGS=$(CONFIGS) STREAM_PERCEPTRON_FUZZ_START=$(START) \
	$(BIN)/python -m pytest -q -s -p no:cacheprovider \
	tests/engine/test_differential_fuzz.py::test_block_path_equals_record_path_long_run

# A real single-node Kafka broker on 127.0.0.1 (jars from Maven Central, no Docker).
kafka-up:
	@kafka/kafka-up.sh

kafka-down:
	@kafka/kafka-down.sh

# The benchmark suite: ratios against River, scikit-learn and Vowpal Wabbit measured in one run.
# It updates benchmarks/results.json (the latest measurement of each row) for the rows it ran and
# writes benchmarks/RESULTS.md, the current table, from it: make bench BENCH_ARGS="--only 3,4".
# Rows 5a/5b need a Kafka broker: the one in KAFKA_BOOTSTRAP_SERVERS, else one started here
# (kafka/kafka-up.sh, on 127.0.0.1) and stopped afterwards.
bench: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test,rdkafka,docs,bench]'
	@if [ -n "$$KAFKA_BOOTSTRAP_SERVERS" ]; then \
	  $(BIN)/python -m benchmarks $(BENCH_ARGS) --markdown benchmarks/RESULTS.md; \
	else \
	  servers=$$(kafka/kafka-up.sh | sed -n 's/^KAFKA_BOOTSTRAP_SERVERS=//p'); \
	  [ -n "$$servers" ] || { echo "bench: the Kafka broker did not start" >&2; exit 1; }; \
	  status=0; \
	  KAFKA_BOOTSTRAP_SERVERS=$$servers $(BIN)/python -m benchmarks $(BENCH_ARGS) \
	    --markdown benchmarks/RESULTS.md || status=$$?; \
	  kafka/kafka-down.sh; \
	  exit $$status; \
	fi

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .venv313 .venv312 site

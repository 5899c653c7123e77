# The two set-up commands of the README: `make run` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test check lint clean kafka-up kafka-down bench

$(BIN)/.installed: pyproject.toml setup.py stream_perceptron/_speedups.c stream_perceptron/_dense.c \
  stream_perceptron/_features.c stream_perceptron/_drift.c
	PYTHON=$(PYTHON) scripts/install-build-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,rdkafka]'
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
# (mypy), runs the learner and C-tier tests on a newer Python too (3.13, else 3.12, from pyenv,
# in .venv313 or .venv312; a loud warning when there is none), then every test, including those
# against a real Kafka broker, Prometheus and Pushgateway.
test: $(BIN)/.installed
	$(BIN)/python scripts/check_extensions.py
	scripts/install-system-deps.sh
	$(BIN)/ruff check .
	$(BIN)/mypy
	scripts/test-newer-python.sh
	$(BIN)/python -m pytest

# The quick loop of a contributor: lint, types and the unit tests that need no broker, browser
# or Prometheus (learners, the C tier, shared-model logic, connectors, doctests), on two
# workers (pytest-xdist; 1m45s here against 2m48s on one); `make test` stays the whole suite.
check: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 tests/learners tests/fast tests/sharing \
	  tests/connectors --ignore=tests/connectors/kafka tests/test_architecture.py \
	  stream_perceptron connectors

# A real single-node Kafka broker on 127.0.0.1 (jars from Maven Central, no Docker).
kafka-up:
	@kafka/kafka-up.sh

kafka-down:
	@kafka/kafka-down.sh

# The benchmark suite: ratios against River, scikit-learn and Vowpal Wabbit measured in one run.
# Rows 5a/5b need a Kafka broker: the one in KAFKA_BOOTSTRAP_SERVERS, else one started here
# (kafka/kafka-up.sh, on 127.0.0.1) and stopped afterwards.
bench: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test,rdkafka,bench]'
	@if [ -n "$$KAFKA_BOOTSTRAP_SERVERS" ]; then \
	  $(BIN)/python -m benchmarks --markdown benchmarks/RESULTS.md; \
	else \
	  servers=$$(kafka/kafka-up.sh | sed -n 's/^KAFKA_BOOTSTRAP_SERVERS=//p'); \
	  [ -n "$$servers" ] || { echo "bench: the Kafka broker did not start" >&2; exit 1; }; \
	  status=0; \
	  KAFKA_BOOTSTRAP_SERVERS=$$servers $(BIN)/python -m benchmarks \
	    --markdown benchmarks/RESULTS.md || status=$$?; \
	  kafka/kafka-down.sh; \
	  exit $$status; \
	fi

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .venv313 .venv312

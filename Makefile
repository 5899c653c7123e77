# The two set-up commands of the README: `make run` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

run: $(BIN)/.installed
	$(BIN)/python -m stream_perceptron.demo

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV)

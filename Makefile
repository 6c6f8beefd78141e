# Two commands: `make run` and `make test`. Everything else is a helper they call.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: install run test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "loadtest needs Python >= 3.11 (set PYTHON=...)")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

run: install
	$(BIN)/loadtest run $(ARGS)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	-$(BIN)/python bench/calibrate.py
	$(BIN)/python bench/sim_throughput.py
	$(BIN)/python bench/trace_build.py
	$(BIN)/python bench/loadgen.py

clean:
	rm -rf $(VENV) results .pytest_cache

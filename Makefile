# minisched: `make lab` runs the workbook, `make test` runs every test. Each target sets itself up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: lab demo test lint typecheck unit notebooks controlplane cluster-local cluster-up cluster-down bench clean

# The virtual environment is rebuilt only when pyproject.toml changes.
$(STAMP): pyproject.toml examples/minisched-plugin-example/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/python -m pip install -q --no-deps -e examples/minisched-plugin-example
	@touch $(STAMP)

venv: $(STAMP)

# JupyterLab opens on chapters/; labs/ is one folder up. LAB_ARGS passes extra options
# (the test of this target uses it for a port and token of its own).
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/chapters \
		--ServerApp.ip=127.0.0.1 $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

demo: $(STAMP)
	$(BIN)/minisched demo

# Real etcd, kube-apiserver, kube-scheduler and KWOK built from Go modules, cached in
# ~/.cache/minisched/controlplane (instant when already built). Without Go, the real-cluster tests
# skip with a message, except in CI (CI=true), where they fail.
controlplane:
	@if command -v go >/dev/null 2>&1; then \
		bash hack/build-controlplane.sh; \
	elif [ "$${CI:-}" = "true" ]; then \
		echo "error: Go is not installed, so the test control plane cannot be built (CI=true)" >&2; exit 1; \
	else \
		echo "note: Go is not installed; real-cluster tests will be skipped (install Go 1.25+ to run them)"; \
	fi

cluster-local: $(STAMP) controlplane
	$(BIN)/python -m minisched.controlplane up

lint: $(STAMP)
	$(BIN)/ruff check minisched tests bench labs
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

unit: $(STAMP)
	$(BIN)/pytest -q

notebooks: $(STAMP)
	$(BIN)/python -m minisched.notebooks check chapters labs

test: $(STAMP) controlplane lint unit notebooks

cluster-up:
	bash hack/kind.sh up

cluster-down:
	bash hack/kind.sh down

bench: $(STAMP)
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

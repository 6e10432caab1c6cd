# minisched: `make lab` runs the workbook, `make test` runs every test. Each target sets itself up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: lab demo test lint typecheck unit notebooks controlplane browser cluster-local cluster-up cluster-down bench \
	clean student-copy grade-course lab-mutants

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

# Headless Chromium for the browser test (tests/browser): Debian's package, installed with apt-get
# when missing and running as root (Playwright drives it; its own browser downloads are not used).
# Without it the browser test skips with a message, except in CI (CI=true), where this fails.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium (Debian's package) for the browser test"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
			|| { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; \
	elif [ "$${CI:-}" = "true" ]; then \
		echo "error: chromium is missing and cannot be installed here (needs root and apt-get) (CI=true)" >&2; exit 1; \
	else \
		echo "note: chromium is not installed; the browser test will be skipped (apt-get install chromium)"; \
	fi

# Set up as `make cluster-up`'s kind cluster; CLUSTER_LOCAL_ARGS="--plane envtest" for the lighter one.
cluster-local: $(STAMP) controlplane
	$(BIN)/python -m minisched.controlplane up $(CLUSTER_LOCAL_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check minisched tests bench labs
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

# The labs' tests run students' wrong answers, some of which never return (a thread cannot be killed:
# labs/harness.py stops what runs Python, not what blocks), so they get a process of their own and
# leave the timing of every other test alone.
unit: $(STAMP)
	$(BIN)/pytest -q --ignore=tests/labs
	$(BIN)/pytest -q tests/labs

notebooks: $(STAMP)
	$(BIN)/python -m minisched.notebooks check chapters labs

test: $(STAMP) controlplane browser lint unit notebooks

cluster-up:
	bash hack/kind.sh up

cluster-down:
	bash hack/kind.sh down

bench: $(STAMP)
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# Instructors: the class's copy (no solutions, no hidden checks) and nbgrader's course folder.
DEST ?= ../minisched-class
COURSE ?= ../minisched-course
student-copy: $(STAMP)
	$(BIN)/python -m labs.student_copy $(DEST)

grade-course: $(STAMP)
	$(BIN)/python -m labs.grading course $(COURSE)

# A slow study, not part of `make test`: every lab's checks run on every mutant of its solution
# (labs/mutants.py), one lab at a time at low priority; the table is kept in labs/MUTANTS.md.
lab-mutants: $(STAMP)
	nice -n 10 $(BIN)/python -m labs.mutants --write $(MUTANTS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

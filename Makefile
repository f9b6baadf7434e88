# The two set-up commands of the README: `make demo` serves the bundled demo logdir,
# `make test` runs every test (browser tests included). Both build .venv on first use.
VENV ?= .venv
PYTHON ?= python3
PORT ?= 6006

# What serving needs, and nothing of the tests'. A plain install: an editable one makes setuptools warn
# about the source folders (make test installs profboard editable, for the tests).
$(VENV)/.installed: pyproject.toml setup.py server/trace/_scan.c
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q .
	touch $@

# The collectors' tests run workloads on the CPU. Pinned: this version's CPU build is what the
# project's machines hold (an unpinned torch would pull a CUDA build of several GB).
TORCH ?= torch==2.13.0
$(VENV)/.collect: $(VENV)/.installed
	$(VENV)/bin/pip install -q '$(TORCH)'
	$(VENV)/bin/pip install -q -e '.[test,collect]'
	touch $@

.PHONY: demo test chromium
demo: $(VENV)/.installed
	$(VENV)/bin/profboard --logdir examples/logdir --port $(PORT)

# Debian's chromium drives the browser tests (Playwright never downloads a browser here).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q chromium; }

# Two workers (pytest-xdist): most tests wait on servers, browsers and timeouts, so on two cores
# the suite takes about 40% less time; each module's tests share a worker (tests/conftest.py).
# The summary lists every skipped test with its reason (pyproject's -rs).
JOBS ?= 2
test: $(VENV)/.collect chromium
	$(VENV)/bin/pytest -q -n $(JOBS) --dist loadgroup

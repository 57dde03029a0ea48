# Two commands do all the set-up on a fresh machine: `make lab` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.perflab-installed

.PHONY: lab test install browser lint typecheck pytest clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# torch is pinned for the dev install (a CPU wheel here); pyproject accepts 2.11-2.14.
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install --quiet "torch==2.13.0"
	$(PIP) install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# Debian's chromium for the browser tests (root on these machines; skipped elsewhere).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium not installed and not root: browser tests will be skipped"; fi; \
	fi

lab: install
	$(VENV)/bin/jupyter lab notebooks/

lint: install
	$(VENV)/bin/ruff check perflab tests benchmarks scripts/gpu-check
	$(VENV)/bin/ruff format --check perflab tests benchmarks

typecheck: install
	$(VENV)/bin/mypy

pytest: install browser
	$(PY) -m pytest -q

test: lint typecheck pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

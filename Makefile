# mapreport: `make demo` and `make test` on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_NIGHTS := 2026-11-28 2026-11-29 2026-11-30
# Debian packages: pango for WeasyPrint, chromium for static chart export (kaleido),
# poppler-utils (pdftoppm, pdftotext) for the PDF tests, libharfbuzz-subset0 for fast PDF fonts,
# CJK and emoji fonts so that names from the wild print as glyphs, not boxes (26 MB together),
# and Java 17 for the Spark engine's tests (local mode; docs/scale.md).
SYSTEM_PACKAGES := libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 chromium poppler-utils \
  fonts-dejavu-core fonts-wqy-zenhei fonts-noto-color-emoji openjdk-17-jre-headless

.PHONY: help setup system venv demo test test-fast lint typecheck unit sample bench clean

help:
	@echo "make demo    set up, run the nightly job on sample_data/'s three nights, write demo/reports/"
	@echo "make test    set up, then ruff, mypy and the whole pytest suite"
	@echo "make test-fast  ruff and the tests not marked slow or spark (under two minutes)"
	@echo "make sample  regenerate sample_data/ from the seeded generator"
	@echo "make bench   run benchmarks/ (installs the peers they compare against)"

setup: system venv

system:
	@missing=""; for p in $(SYSTEM_PACKAGES); do \
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

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
	@$(BIN)/python -m pip install -q -e '.[dev,spark,xplane]' 2>&1 | grep -v "^WARNING: Location" || true
	@$(BIN)/python -c "import mapreport, duckdb, weasyprint, kaleido, msgspec" \
	  || { echo "error: the Python environment in $(VENV) is incomplete" >&2; exit 1; }
	@touch $(STAMP)

demo: setup
	@rm -rf demo
	@for night in $(DEMO_NIGHTS); do \
	  echo "== night $$night"; \
	  $(BIN)/mapreport run sample_data/mapreport.toml --date $$night || exit $$?; \
	done
	@echo
	@echo "Open demo/reports/index.html (HTML reports, PDFs and findings.json per slice)."

lint: venv
	$(BIN)/ruff check mapreport tests $(wildcard benchmarks)
	$(BIN)/ruff format --check mapreport tests $(wildcard benchmarks)

typecheck: venv
	$(BIN)/mypy
	$(BIN)/mypy benchmarks

# one test worker per core (pytest-xdist), a file's tests on one worker: its module fixtures
# (a Spark session, Chromium) are made once; TEST_JOBS=0 runs them in this process. The demo's
# set-up is built once for every worker and run of the same code (tests/conftest.py, `cached`)
TEST_JOBS ?= auto
PYTEST = $(BIN)/pytest -q -n $(TEST_JOBS) --dist loadfile
# the fast set has no Spark or Chromium fixture: an idle worker takes queued tests from the
# other, so no worker waits on one slow file (test_golden, test_judgement_corpus)
PYTEST_FAST = $(BIN)/pytest -q -n $(TEST_JOBS) --dist worksteal

unit: setup
	$(PYTEST)

test: setup lint typecheck unit

# the loop while editing: every test but those marked slow (PDFs, Chromium, many nights or
# files, fuzzing, processes) or spark; `make test` and CI still run them all
test-fast: venv
	$(BIN)/ruff check mapreport tests $(wildcard benchmarks)
	$(PYTEST_FAST) -m "not slow and not spark"

# benchmarks/: figures against named peers, run on demand (not part of `make test`)
BENCH_SIZES ?= 100000 1000000 10000000

bench: setup
	@$(BIN)/python -c "import hta" 2>/dev/null || $(BIN)/python -m pip install -q holistictraceanalysis==0.5.0
	$(BIN)/python benchmarks/kineto_ingest.py --copies 10 --runs 5
	$(BIN)/python benchmarks/fleet.py --sizes $(BENCH_SIZES) --runs 3 --full-from 100000
	$(BIN)/python benchmarks/startup.py --runs 21
	$(BIN)/python benchmarks/analysis.py --sizes 1000000 10000000 --runs 3
	$(BIN)/python benchmarks/render.py --runs 3 --many 50 --slices 40 --per-slice 50000

sample: venv
	$(BIN)/python -c "from pathlib import Path; from mapreport.demo.nights import generate_nights; generate_nights(Path('sample_data'))"

clean:
	rm -rf demo out .pytest_cache .mypy_cache .ruff_cache

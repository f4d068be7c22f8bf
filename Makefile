# Every target installs what it needs into .venv, so a fresh machine needs only python3.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SAMPLE := build/sample
DEMO_OUT := build/demo-out

.PHONY: venv demo test lint format bench slurm-up slurm-down clean

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed

# The demo's output is its own: start it afresh so each run shows the work (a re-run would skip it all).
demo: venv
	@test -d $(SAMPLE) || $(PY) -m curator_slurm.sample $(SAMPLE) --files 16 --docs-per-file 500
	rm -rf $(DEMO_OUT)
	$(PY) examples/curate.py --input $(SAMPLE) --output $(DEMO_OUT)

test: venv
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: venv
	$(PY) benchmarks/run.py $(BENCH_ARGS)

slurm-up:
	bash scripts/slurm-up.sh

slurm-down:
	bash scripts/slurm-down.sh

clean:
	rm -rf build .pytest_cache .ruff_cache

# Every target installs what it needs into .venv, so a fresh machine needs only python3.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SAMPLE := build/sample
DEMO_OUT := build/demo-out

.PHONY: venv demo test test-pyarrow-floor test-trafilatura1 lint typecheck format bench scale scale-data slurm-up slurm-down s3-up s3-down clean

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed

# The demo's output is its own: start it afresh so each run shows the work (a re-run would skip it all).
demo: venv
	@test -d $(SAMPLE) || $(PY) -m curator_slurm.samples.corpus $(SAMPLE) --files 16 --docs-per-file 500
	rm -rf $(DEMO_OUT)
	$(PY) examples/curate.py --input $(SAMPLE) --output $(DEMO_OUT)

test: venv
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The oldest pyarrow that pyproject.toml admits, in a venv of its own, under the tests that exercise
# pyarrow (no Slurm, no Ray). That pyarrow needs numpy 1.x, whose OpenBLAS would start threads and make
# the pool's workers spawn (the tests check that they fork): OPENBLAS_NUM_THREADS=1 keeps it to one.
# pyarrow 14 has wheels for Python 3.8-3.12 only: PYTHON must be one of those.
FLOOR_VENV ?= .venv-pyarrow-floor
PYARROW_FLOOR := 14.0.2
FLOOR_TESTS := tests/stages/test_readers.py tests/stages/test_partitioning.py tests/stages/test_writers.py \
	tests/stages/test_filters.py tests/stages/test_heuristic_filters.py tests/stages/test_re2_space.py tests/runs/test_ledger.py \
	tests/runs/test_sharding.py tests/runs/test_ledger_partition.py tests/runs/test_group_commit.py tests/slurm/test_status.py \
	tests/backends/test_stop_signal.py tests/backends/test_adapter_retries.py \
	tests/backends/test_local_executor.py tests/test_settings.py tests/test_positions.py tests/examples/test_curate.py \
	tests/dedup tests/fs tests/stages/test_reader_inputs.py tests/test_chain.py

$(FLOOR_VENV)/.installed: pyproject.toml Makefile
	@test -x $(FLOOR_VENV)/bin/python || $(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FLOOR_VENV)/bin/python -m pip install --quiet 'pyarrow==$(PYARROW_FLOOR)' 'numpy<2' 'pandas<2.3' xxhash loguru pytest pytest-mock hypothesis
	$(FLOOR_VENV)/bin/python -m pip install --quiet --no-deps -e .
	@touch $@

test-pyarrow-floor: $(FLOOR_VENV)/.installed
	OPENBLAS_NUM_THREADS=1 $(FLOOR_VENV)/bin/python -m pytest -q -m "not slurm" $(FLOOR_TESTS)

# Trafilatura 1.x (FineWeb's, and datatrove's pin: <1.12) in a venv of its own, under the tests that extract
# (`make test` has the newest 2.x): each page's text is the library's own, the recipe says what it departs in.
TRAFILATURA1_VENV ?= .venv-trafilatura1
TRAFILATURA1 := 1.11.0
TRAFILATURA1_TESTS := tests/stages/test_extractors.py tests/stages/test_extractor_limits.py \
	tests/examples/test_extract.py tests/examples/test_fineweb_departures.py

$(TRAFILATURA1_VENV)/.installed: pyproject.toml Makefile
	@test -x $(TRAFILATURA1_VENV)/bin/python || $(PYTHON) -m venv $(TRAFILATURA1_VENV)
	$(TRAFILATURA1_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TRAFILATURA1_VENV)/bin/python -m pip install --quiet -e '.[web,fineweb,fasttext]' 'trafilatura==$(TRAFILATURA1)' \
		pytest pytest-mock hypothesis
	@touch $@

test-trafilatura1: $(TRAFILATURA1_VENV)/.installed
	$(TRAFILATURA1_VENV)/bin/python -m pytest -q -m "not slurm" $(TRAFILATURA1_TESTS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The types of src/ ([tool.mypy] in pyproject.toml says which files and how strictly).
typecheck: venv
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: venv
	$(PY) benchmarks/run.py $(BENCH_ARGS)

# Not in CI: a 1,100-task array on the local cluster (scripts/slurm-up.sh; submitted at the lowest priority) and a
# simulated 10,000-process array; the figures go to docs/performance.md (see benchmarks/scale.py).
scale: venv
	$(PY) benchmarks/scale.py $(SCALE_ARGS)

# Not in CI: the data path's growth laws (fuzzy dedup's phases at three sizes, a process each: CPU, peak memory,
# bytes, files) and the Common Crawl dump's table they give (docs/scale.md; see benchmarks/scale_data.py).
scale-data: venv
	$(PY) benchmarks/scale_data.py $(SCALE_DATA_ARGS)

slurm-up:
	bash scripts/slurm-up.sh

slurm-down:
	bash scripts/slurm-down.sh

s3-up: venv
	bash scripts/s3-up.sh

s3-down:
	bash scripts/s3-down.sh

clean:
	rm -rf build .pytest_cache .ruff_cache .mypy_cache

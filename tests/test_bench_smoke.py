"""The benchmark script runs end to end (``--quick``) and reports every row with a number; its harness
launches children as the rows rely on (a clean environment, failures raised, limits reported).

Only that: the values of a quick run on tiny corpora say nothing about performance, so no assertion
here looks at them.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.helpers import clean_env

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "run.py"


def _load_run() -> Any:
    """benchmarks/run.py as a module: its registry, and the bench package it puts on ``sys.path``."""
    spec = importlib.util.spec_from_file_location("curator_bench_run", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _row_keys() -> tuple[str, ...]:
    """The rows the script declares (its registry), so a new row is covered without editing this test."""
    return tuple(_load_run().ROW_KEYS)


def _harness() -> Any:
    _load_run()
    return importlib.import_module("bench.harness")


def test_child_gets_no_inherited_shard_variables_but_the_rows_own(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = _harness()
    monkeypatch.setenv("CURATOR_NUM_SHARDS", "4")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    show = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('CURATOR_')}))"
    child = harness.run_child([sys.executable, "-c", show], extra={"CURATOR_PHASE": "hash"})
    assert json.loads(child.stdout) == {"CURATOR_PHASE": "hash"}
    show_slurm = "import os; print(os.environ.get('SLURM_ARRAY_TASK_ID', 'unset'))"
    assert harness.run_child([sys.executable, "-c", show_slurm]).stdout.strip() == "unset"


def test_failed_child_raises_naming_its_command_and_exit_code() -> None:
    harness = _harness()
    with pytest.raises(harness.BenchError, match=r"sys.exit\(3\).* exited 3"):
        harness.run_child([sys.executable, "-c", "import sys; sys.exit(3)"])


def test_child_over_its_memory_limit_is_reported_with_its_error() -> None:
    harness = _harness()
    limits = harness.Limits(memory=512 << 20)
    child = harness.run_child([sys.executable, "-c", "x = bytearray(1 << 30)"], limits=limits, check=False)
    assert child.rc == 1
    assert child.stderr.strip().splitlines()[-1] == "MemoryError"
    fits = harness.run_child([sys.executable, "-c", "x = bytearray(1 << 20)"], limits=limits)
    assert fits.rc == 0


def test_quick_bench_reports_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(out)],
        env=clean_env({"CURATOR_BENCH_DIR": str(tmp_path / "bench")}),
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang, not a speed check: a busy shared machine takes minutes
    )
    assert proc.returncode == 0, f"benchmarks/run.py --quick failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "PASS" in proc.stdout or "MISS" in proc.stdout, proc.stdout

    report = json.loads(out.read_text())
    rows = {row["key"]: row for row in report["rows"]}
    expected = _row_keys()
    assert set(expected) <= set(rows), f"rows missing from the JSON: {sorted(set(expected) - set(rows))}"
    for key in expected:
        row = rows[key]
        for number in (row["value"], row["target"], row["a"]["median"], row["b"]["median"]):
            assert isinstance(number, (int, float)) and not isinstance(number, bool), (key, number)
            assert math.isfinite(number), (key, number)
        assert isinstance(row["passed"], bool)
    for field in ("nproc", "python", "pyarrow"):
        assert report["machine"][field], field

"""The benchmark script runs end to end (``--quick``) and reports every row with a number.

Only that: the values of a quick run on tiny corpora say nothing about performance, so no assertion
here looks at them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

from helpers import clean_env

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "run.py"


def _row_keys() -> tuple[str, ...]:
    """The rows the script declares (its registry), so a new row is covered without editing this test."""
    spec = importlib.util.spec_from_file_location("curator_bench_run", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return tuple(module.ROW_KEYS)


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

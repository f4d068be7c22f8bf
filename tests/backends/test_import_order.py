"""Import order does not matter: a script that imports pyarrow (and so numpy, whose OpenBLAS starts a pool of
threads as it loads) before curator_slurm still gets forked workers, and the start line of the log is short.

Before, the driver counted OpenBLAS's threads, spawned its workers instead (a fresh interpreter each) and
logged a 400-character reason. Now the idle pool is stopped before the count, as OpenBLAS's own fork
handler stops it, and BLAS works again in the driver and in every worker.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import clean_env

pytest.importorskip("numpy")

SCRIPT = """
import os
import numpy  # what `import pyarrow` does first where numpy is installed
import pyarrow

def threads():
    return len(os.listdir("/proc/self/task"))

print("threads-before", threads(), flush=True)

from curator_slurm import LocalExecutor, Pipeline, configure_logging
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage
from curator_slurm.tasks import DocumentBatch


class UsesBlas(ProcessingStage[DocumentBatch, DocumentBatch]):
    name = "uses_blas"

    def process(self, task):
        a = numpy.arange(40000, dtype=float).reshape(200, 200) / 40000
        assert float((a @ a).sum()) > 0  # a parallel BLAS call in the worker
        return task


if __name__ == "__main__":
    configure_logging()
    a = numpy.ones((300, 300))
    assert float((a @ a).sum()) == 300.0**3  # the driver's pool is up and working
    Pipeline("p").add_stage(JsonlReader({inp!r})).add_stage(UsesBlas()).add_stage(ParquetWriter({out!r})).run(
        LocalExecutor(workers=2)
    )
    assert float((a @ a).sum()) == 300.0**3  # and works again after the pool was stopped
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork on Linux only")
def test_pyarrow_imported_first_still_forks_and_logs_a_short_line(corpus: Path, tmp_path: Path) -> None:
    script = tmp_path / "pyarrow_first.py"
    out = tmp_path / "out"
    script.write_text(SCRIPT.format(inp=str(corpus), out=str(out)))
    # An explicit pool of 2 BLAS threads, so that the driver surely has threads to stop (on one CPU OpenBLAS
    # would start none, and the test would prove nothing).
    env = clean_env({"OPENBLAS_NUM_THREADS": "2"})
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    before = re.search(r"threads-before (\d+)", proc.stdout)
    assert before and int(before.group(1)) > 2, f"numpy's OpenBLAS started no pool: {proc.stdout}"
    lines = [line for line in proc.stderr.splitlines() if "worker processes by" in line]
    assert len(lines) == 1, proc.stderr
    assert "starting 2 worker processes by fork (this process runs no other thread)" in lines[0]
    assert len(lines[0]) < 160, lines[0]
    assert len(list(out.glob("*.parquet"))) == 12

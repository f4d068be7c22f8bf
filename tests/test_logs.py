"""Where log lines go: by default to stderr with the shard and job in every line of a shard, from
spawned workers too; ``configure_logging`` sets the level; a script's own logging setup is respected."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import clean_env

SCRIPT = """
import logging, os, sys
from pathlib import Path
from curator_slurm import LocalExecutor, Pipeline, configure_logging
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage


class FailsOnce(ProcessingStage):
    '''Fails the first attempt of the first task that reaches it, in whichever worker that is.'''

    def __init__(self, flag):
        self.flag = flag

    def process(self, task):
        try:
            os.remove(self.flag)
        except FileNotFoundError:
            return task
        raise RuntimeError("first attempt fails")


if __name__ == "__main__":
    inp, out, flag, setup, method = sys.argv[1:6]
    if setup == "configure-warning":
        configure_logging("WARNING")
    elif setup == "root-handler":
        logging.basicConfig(level=logging.INFO, format="ROOT %(name)s %(levelname)s %(message)s")
    pipeline = Pipeline("logs").add_stage(JsonlReader(inp)).add_stage(FailsOnce(flag)).add_stage(ParquetWriter(out))
    result = pipeline.run(LocalExecutor(workers=2, start_method=method, retry_backoff=0.01))
    if setup == "root-after":  # the script sets up its own logging only after a first run
        logging.basicConfig(level=logging.INFO, format="ROOT %(message)s")
        logging.getLogger("curator_slurm.check").warning("one line after basicConfig")
    print(result.done, len(result.failed))
"""

ARRAY_TASK = {
    "SLURM_JOB_ID": "7001",
    "SLURM_ARRAY_JOB_ID": "7000",
    "SLURM_ARRAY_TASK_ID": "1",
    "SLURM_ARRAY_TASK_COUNT": "2",
    "SLURM_ARRAY_TASK_MIN": "0",
    "SLURM_ARRAY_TASK_MAX": "1",
    "SLURM_ARRAY_TASK_STEP": "1",
}
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| (\w+) +\| (shard \d+/\d+|-) (job \S+|-) \| (.*)$")


def run_script(corpus: Path, tmp_path: Path, setup: str, method: str = "spawn") -> subprocess.CompletedProcess[str]:
    script, flag = tmp_path / "logs.py", tmp_path / "flag"
    script.write_text(SCRIPT)
    flag.touch()
    proc = subprocess.run(
        [sys.executable, str(script), str(corpus), str(tmp_path / "out"), str(flag), setup, method],
        capture_output=True,
        text=True,
        timeout=180,
        env=clean_env(ARRAY_TASK),
    )
    assert proc.returncode == 0, proc.stderr
    assert not flag.exists(), "the failing attempt ran"
    done, failed = map(int, proc.stdout.split())
    assert done > 0 and failed == 0, proc.stdout
    return proc


def test_without_any_setup_progress_and_worker_warnings_reach_stderr_with_shard_and_job(
    corpus: Path, tmp_path: Path
) -> None:
    proc = run_script(corpus, tmp_path, "none")
    lines = [LINE.match(x) for x in proc.stderr.splitlines()]
    assert all(lines), proc.stderr
    driver = [m.groups() for m in lines if m and m[2] == "shard 1/2"]
    assert all(job == "job 7000_1" for _, _, job, _ in driver), driver
    messages = [message for _, _, _, message in driver]
    assert any(m.startswith("pipeline 'logs': ") for m in messages), messages
    assert any(m.startswith("shard 1/2: kept ") for m in messages), messages
    assert any("starting 2 worker processes by spawn" in m for m in messages), messages
    # The retry is logged in a spawned worker, outside any shard binding: it shows `-` there.
    retried = [m.groups() for m in lines if m and "failed on task" in m[4]]
    assert [(level, shard, job) for level, shard, job, _ in retried] == [("WARNING", "-", "-")], proc.stderr
    assert retried[0][3].endswith("(attempt 1): RuntimeError('first attempt fails'); retrying")


def test_configure_logging_sets_the_level_for_driver_and_workers(corpus: Path, tmp_path: Path) -> None:
    proc = run_script(corpus, tmp_path, "configure-warning")
    assert "INFO" not in proc.stderr and "kept " not in proc.stderr, proc.stderr
    warnings = [x for x in proc.stderr.splitlines() if LINE.match(x)]
    assert len(warnings) == 1 and "| WARNING | - - | stage 'fails_once' failed on task " in warnings[0], proc.stderr


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_script_that_configures_logging_itself_gets_every_line_once(
    corpus: Path, tmp_path: Path, method: str
) -> None:
    """Forked workers inherit the script's handlers; a spawned worker cannot, and prints its lines in
    the package's format (to stderr, at the driver's level) rather than losing them."""
    proc = run_script(corpus, tmp_path, "root-handler", method=method)
    lines = proc.stderr.splitlines()
    driver = [x for x in lines if "failed on task" not in x]
    assert driver and all(x.startswith(("ROOT curator_slurm.", "ROOT curator_slurm ")) for x in driver), proc.stderr
    assert sum("pipeline 'logs': " in x for x in lines) == 1, proc.stderr
    (worker,) = [x for x in lines if "failed on task" in x]
    assert worker.startswith("ROOT curator_slurm.") if method == "fork" else LINE.match(worker), worker


def test_a_root_handler_added_after_a_run_does_not_print_the_package_lines_twice(corpus: Path, tmp_path: Path) -> None:
    """The default handler steps aside: from then on the package's lines go to the script's handler only."""
    proc = run_script(corpus, tmp_path, "root-after", method="fork")
    after = [x for x in proc.stderr.splitlines() if "one line after basicConfig" in x]
    assert after == ["ROOT one line after basicConfig"], proc.stderr
    assert any(LINE.match(x) and "pipeline 'logs': " in x for x in proc.stderr.splitlines()), "before it: ours"

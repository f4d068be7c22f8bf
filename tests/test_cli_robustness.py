"""The command line with awkward input (issue 14, item 14): #SBATCH values with spaces, a forgotten `--`,
bad --signal values, programming errors that keep their traceback, a bad SLURM_CPUS_PER_TASK."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm import cli
from curator_slurm.errors import SettingError
from curator_slurm.settings import available_cpus
from curator_slurm.slurm.submit import ArrayChunk, SubmitOptions, render_script
from support.helpers import EXAMPLE, clean_env, read_tree, run_example
from support.slurmtools import wait_for_job


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", *args], capture_output=True, text=True, env=clean_env(), cwd=cwd,
        timeout=300,
    )  # fmt: skip


def test_sbatch_values_with_spaces_are_quoted() -> None:
    opts = SubmitOptions(script="/w/my job.py", shards=2, run_dir="/w/out dir/run", job_name="my job")
    script = render_script(opts, ArrayChunk(0, 2))
    assert '#SBATCH --job-name="my job"\n' in script
    assert '#SBATCH --output="/w/out dir/run/logs/%A_%a.log"\n' in script


@pytest.mark.slurm
def test_a_script_whose_path_has_a_space_runs_as_an_array(slurm_cluster: str, corpus: Path, tmp_path: Path) -> None:
    folder = tmp_path / "my scripts"
    folder.mkdir()
    script = folder / "my curate.py"
    shutil.copy(EXAMPLE, script)
    out, reference = tmp_path / "out dir", tmp_path / "reference"
    run_example(corpus, reference, "--workers", "1")
    proc = run_cli("submit", str(script), "--shards", "2", "--", "--input", str(corpus), "--output", str(out),
                   "--workers", "1", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (job,) = cli_job_ids(proc.stdout)
    assert wait_for_job(job, timeout=300) == {"0": "COMPLETED", "1": "COMPLETED"}
    name = subprocess.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%j"], capture_output=True, text=True)
    assert set(name.stdout.split("\n")) - {""} == {"my curate"}
    assert read_tree(out) == read_tree(reference)
    assert (out / ".curator-run" / "logs" / f"{job}_0.log").is_file()


def cli_job_ids(stdout: str) -> list[str]:
    import re

    return re.findall(r"(\d+) \(shards", stdout)


def test_forgetting_the_double_dash_gets_a_hint(corpus: Path, tmp_path: Path) -> None:
    proc = run_cli("submit", str(EXAMPLE), "--shards", "2", "--input", str(corpus), "--output", str(tmp_path))
    assert proc.returncode == 2
    assert "unrecognized arguments: --input" in proc.stderr
    assert "the pipeline script's own options go after `--`" in proc.stderr and f"-- --input {corpus}" in proc.stderr


@pytest.mark.parametrize(
    ("value", "complaint"),
    [("B:USR1@abc", "'abc' is not a number of seconds"), ("B:NOPE@60", "'NOPE' is not a signal"), ("B:", "not a")],
)
def test_bad_signal_values_are_refused_before_rendering(
    corpus: Path, tmp_path: Path, value: str, complaint: str
) -> None:
    proc = run_cli("submit", str(EXAMPLE), "--shards", "2", "--dry-run", f"--signal={value}", "--", "--input",
                   str(corpus), "--output", str(tmp_path / "out"))  # fmt: skip
    assert proc.returncode == 2 and complaint in proc.stderr, proc.stderr
    assert "#SBATCH" not in proc.stdout
    good = render_script(SubmitOptions(script="/w/c.py", signal="SIGUSR2@600"), ArrayChunk(0, 1))
    assert "#SBATCH --signal=SIGUSR2@600" in good


def test_programming_errors_keep_their_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def buggy(args: object, rest: list[str]) -> int:
        raise ValueError("a bug, not bad input")

    monkeypatch.setitem(cli.COMMANDS, "status", buggy)
    with pytest.raises(ValueError, match="a bug, not bad input"):
        cli.main(["status", str(tmp_path)])
    monkeypatch.undo()
    assert cli.main(["status", str(tmp_path / "missing")]) == 2  # bad input: one line, exit 2


@pytest.mark.parametrize("value", ["abc", "0", "-2"])
def test_a_bad_slurm_cpus_per_task_is_an_error_naming_it(value: str) -> None:
    with pytest.raises(SettingError, match=f"SLURM_CPUS_PER_TASK='{value}'"):
        available_cpus({"SLURM_CPUS_PER_TASK": value})
    assert available_cpus({"SLURM_CPUS_PER_TASK": "3"}) == 3


def test_job_states_asks_each_id_when_squeue_refuses_a_list_with_a_forgotten_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some Slurm versions refuse the whole -j list when one id is unknown: the known ids must not be lost."""
    from curator_slurm.slurm.control import job_states

    fake = tmp_path / "bin" / "squeue"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/bash\n"
        'ids=""; while [ $# -gt 0 ]; do [ "$1" = -j ] && ids="$2"; shift; done\n'
        'case "$ids" in\n'
        '  41) echo "41_0 RUNNING"; echo "41_1 FAILED" ;;\n'
        '  *) echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1 ;;\n'
        "esac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    assert job_states(["41", "7"]) == {"41_0": "RUNNING", "41_1": "FAILED"}
    assert job_states(["7"]) == {}

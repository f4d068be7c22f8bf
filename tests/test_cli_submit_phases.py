"""Slurm resources per phase of a workflow: ``--phase-<option> PHASE=VALUE`` over what the workflow declares for the
phase, over the plain option; ``--dependency`` on outside jobs; each phase's lines in ``submit --dry-run``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_slurm.slurm.phases import PhaseOptionError, parse_phase_resources, with_phase_resources
from support.helpers import REPO, clean_env

DEDUP = REPO / "examples" / "dedup.py"
PHASES = ["hash", "find", "write"]

#: A copy of examples/dedup.py whose find phase declares its own resources, as fineweb.py declares its own.
DECLARING = """
import dataclasses, runpy, sys
from curator_slurm.workflows.workflow import PhaseResources, Workflow
real = Workflow.__init__
def declaring(self, name, work_dir, phases):
    own = PhaseResources(mem="6G", time="3:00:00", cpus_per_task=3, sbatch_args=("--qos=big",))
    real(self, name, work_dir, [dataclasses.replace(p, resources=own) if p.name == "find" else p for p in phases])
Workflow.__init__ = declaring
sys.argv[0] = {script!r}
runpy.run_path({script!r}, run_name="__main__")
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", *args], capture_output=True, text=True, env=clean_env(), timeout=300
    )


def dry_run(script: Path, corpus: Path, out: Path, *options: str) -> tuple[dict[str, list[str]], str]:
    """Each phase's ``#SBATCH`` lines of ``submit --dry-run``, and what it said on stderr."""
    proc = cli("submit", str(script), "--shards", "2", *options, "--dry-run", "--", "--input", str(corpus),
               "--output", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines: dict[str, list[str]] = {}
    phase = ""
    for line in proc.stdout.splitlines():
        if match := re.match(r"# === phase '(\w+)'", line):
            phase = match.group(1)
        elif line.startswith("#SBATCH"):
            lines.setdefault(phase, []).append(line[len("#SBATCH ") :])
    return lines, proc.stderr


def test_each_phase_gets_its_own_lines_the_plain_options_for_the_rest(corpus: Path, tmp_path: Path) -> None:
    lines, _ = dry_run(
        DEDUP, corpus, tmp_path / "out", "--time", "20:00", "--mem", "1G", "--sbatch-arg=--account=a",
        "--phase-time", "write=30:00", "--phase-mem", "hash=2G,find=3G", "--phase-cpus-per-task", "write=2",
        "--phase-partition", "find=debug,other", "--phase-throttle", "write=1",
        "--phase-sbatch-arg", "find=--qos=high", "--phase-sbatch-arg", "find=--constraint=a,b",
    )  # fmt: skip
    assert list(lines) == PHASES
    hash_, find, write = (lines[p] for p in PHASES)
    assert {"--time=20:00", "--mem=2G", "--array=0-1"} <= set(hash_) and not any("cpus" in x for x in hash_)
    assert {"--time=20:00", "--mem=3G", "--partition=debug,other", "--qos=high", "--constraint=a,b"} <= set(find)
    assert find.index("--account=a") < find.index("--qos=high"), "a phase's own sbatch options come after the plain"
    assert {"--time=30:00", "--mem=1G", "--cpus-per-task=2", "--array=0-1%1"} <= set(write)
    assert not any("qos" in x or "partition" in x for x in (*hash_, *write)), "nothing leaks into another phase"


def test_what_a_workflow_declares_for_a_phase_beats_the_plain_option_and_loses_to_the_phase_option(
    corpus: Path, tmp_path: Path
) -> None:
    """Per phase beats every phase; of two per-phase values, the command line's beats the code's. Where the code's
    wins over a plain option given, a note says so, with the option that changes it."""
    script = tmp_path / "declaring.py"
    script.write_text(DECLARING.format(script=str(DEDUP)))
    lines, err = dry_run(script, corpus, tmp_path / "out", "--mem", "1G", "--time", "10:00")
    assert {"--mem=6G", "--time=3:00:00", "--cpus-per-task=3", "--qos=big"} <= set(lines["find"])
    assert {"--mem=1G", "--time=10:00"} <= set(lines["hash"]) and {"--mem=1G"} <= set(lines["write"])
    assert "phase 'find' keeps 6G for --mem" in err and "--phase-mem find=1G" in err, err
    lines, err = dry_run(script, corpus, tmp_path / "out", "--mem", "1G", "--phase-mem", "find=2G")
    assert {"--mem=2G", "--time=3:00:00"} <= set(lines["find"]) and "--mem=6G" not in lines["find"]
    assert "keeps 6G" not in err


def test_dependency_holds_the_first_phase_only(corpus: Path, tmp_path: Path) -> None:
    lines, _ = dry_run(DEDUP, corpus, tmp_path / "out", "--dependency", "41,42_3")
    assert "--dependency=afterok:41:42_3" in lines["hash"]
    assert "--dependency=afterok:<jobs of hash>" in lines["find"] and not any("41" in x for x in lines["find"])


def test_a_pipeline_takes_dependency_and_refuses_phase_options(corpus: Path, tmp_path: Path) -> None:
    args = ["--dry-run", "--", "--input", str(corpus), "--output", str(tmp_path / "out")]
    curate = str(REPO / "examples" / "curate.py")
    proc = cli("submit", curate, "--shards", "2", "--dependency", "7", *args)
    assert proc.returncode == 0 and "#SBATCH --dependency=afterok:7" in proc.stdout, proc.stderr
    proc = cli("submit", curate, "--shards", "2", "--phase-mem", "x=1G", *args)
    assert proc.returncode == 2 and "--phase-mem" in proc.stderr and "no workflow" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--phase-mem", "nope=1G"], "no phase 'nope'; the phases are ['hash', 'find', 'write']"),
        (["--phase-time", "1:00:00"], "is not PHASE=VALUE"),
        (["--phase-time", "find=soon"], "phase 'find': --time 'soon': not a Slurm time limit"),
        (["--phase-cpus-per-task", "find=0"], "find='0' is not a whole number >= 1"),
        (["--phase-throttle", "write="], "no value for phase 'write'"),
        (["--dependency", "12,abc"], "'abc' is not a job id"),
    ],
)
def test_bad_per_phase_values_are_refused_naming_them(
    corpus: Path, tmp_path: Path, options: list[str], says: str
) -> None:
    proc = cli("submit", str(DEDUP), "--shards", "2", *options, "--dry-run", "--", "--input", str(corpus),
               "--output", str(tmp_path / "out"))  # fmt: skip
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


NAMES = st.sampled_from(PHASES)
TIMES = st.builds(lambda h, m: f"{h}:{m:02d}:00", st.integers(0, 99), st.integers(0, 59))
PARTITIONS = st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), min_size=1, max_size=3).map(",".join)


@settings(max_examples=200, deadline=None)
@given(times=st.dictionaries(NAMES, TIMES), partitions=st.dictionaries(NAMES, PARTITIONS),
       cpus=st.dictionaries(NAMES, st.integers(1, 64)), split=st.booleans())  # fmt: skip
def test_what_is_written_per_phase_is_what_each_phase_gets(
    times: dict[str, str], partitions: dict[str, str], cpus: dict[str, int], split: bool
) -> None:
    """For any values per phase, written in one flag or one flag per phase (a partition list's commas
    included), each phase gets exactly its own and no other."""

    def texts(values: dict[str, object]) -> list[str] | None:
        parts = [f"{k}={v}" for k, v in values.items()]
        return (parts if split else [",".join(parts)]) if parts else None

    parsed = parse_phase_resources(
        {"time": texts(times), "partition": texts(partitions), "cpus_per_task": texts(cpus)},
        PHASES,  # type: ignore[arg-type]
    )
    for phase in PHASES:
        want = {"time": times.get(phase), "partition": partitions.get(phase), "cpus_per_task": cpus.get(phase)}
        assert parsed.get(phase, {}) == {k: v for k, v in want.items() if v is not None}
    plan = {"phases": [{"phase": p, "resources": {"mem": "9G"}} for p in PHASES]}
    merged = with_phase_resources(plan, parsed)
    assert all(p["resources"] == {"mem": "9G", **parsed.get(p["phase"], {})} for p in merged["phases"])


def test_an_option_that_is_not_per_phase_is_not_offered() -> None:
    with pytest.raises(PhaseOptionError, match="no phase"):
        parse_phase_resources({"mem": ["hash=1G,wrte=2G"]}, PHASES)
    proc = cli("submit", "--help")
    flags = set(re.findall(r"--phase-[a-z-]+", proc.stdout))
    assert flags == {"--phase-shards", "--phase-throttle", "--phase-time", "--phase-partition",
                     "--phase-cpus-per-task", "--phase-mem", "--phase-gpus-per-task", "--phase-sbatch-arg"}  # fmt: skip


def test_local_runs_a_phase_at_most_its_throttle_at_once(corpus: Path, tmp_path: Path) -> None:
    """`local` takes what applies on one machine: a phase's throttle caps its processes at once."""
    args = ["--", "--input", str(corpus), "--output", str(tmp_path / "out")]
    bad = cli("local", str(DEDUP), "--shards", "2", "--phase-throttle", "fnd=1", *args)
    assert bad.returncode == 2 and "no phase 'fnd'" in bad.stderr, bad.stderr
    proc = cli("local", str(DEDUP), "--shards", "2", "--parallel", "2", "--phase-throttle", "find=1",
               "--logs", str(tmp_path / "logs"), *args)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    at_a_time = dict(re.findall(r"phase (\w+):\nrunning \d+ shards of .*?, (\d+) at a time", proc.stdout))
    assert at_a_time == {"hash": "2", "find": "1", "write": "2"}, proc.stdout


def test_a_workflow_retry_asks_for_what_its_submission_asked_per_phase(tmp_path: Path) -> None:
    """The resolved resources are saved with the workflow's plan: a retry (which resubmits from the saved
    submission) gives each phase its own again, a plain option given to it only to the phases without one."""
    from curator_slurm.slurm.phases import load_submission, preview_phases, save_submission
    from curator_slurm.slurm.submit import SubmitOptions

    phases = [{"phase": p, "run_dir": str(tmp_path / p), "tasks": [], "resources": {}} for p in PHASES]
    given = parse_phase_resources({"mem": ["find=5G"], "sbatch_args": ["find=--qos=x"]}, PHASES)
    plan = with_phase_resources({"workflow": "w", "run_dir": str(tmp_path), "phases": phases}, given)
    base = SubmitOptions(script="s.py", run_dir=str(tmp_path), mem="1G")
    save_submission(str(tmp_path), base, dict.fromkeys(PHASES, 1), plan)
    saved = load_submission(str(tmp_path))
    assert saved is not None
    opts, counts, again = saved
    plain = opts.with_arguments({"mem": "2G"})
    retried = {name: o for name, o, _ in preview_phases(plain, again, counts, (1001, None))}
    assert retried["find"].mem == "5G" and "--qos=x" in retried["find"].sbatch_args
    assert retried["hash"].mem == retried["write"].mem == "2G" and "--qos=x" not in retried["write"].sbatch_args

"""The `curator-slurm` command line, as a user runs it: real processes, real files, the real cluster."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from curator_slurm.cli.commands import EXAMPLES
from curator_slurm.runs.ledger import iter_records, load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.samples.corpus import make_corpus
from curator_slurm.slurm.submit import (
    ArrayChunk,
    SubmitOptions,
    format_indices,
    format_tasks,
    parse_array_limits,
    render_script,
    split_shards,
)
from support.executors import requires_ray
from support.helpers import EXAMPLE, REPO, clean_env, read_tree, run_example
from support.slurmtools import max_array_size, show_job, wait_for_job

CLI = [sys.executable, "-m", "curator_slurm.cli"]


def cli(
    *args: str, cwd: Path | None = None, check: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, env=clean_env(env), cwd=cwd, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"curator-slurm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


# --- pure functions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("indices", "text"),
    [([], ""), ([5], "5"), ([0, 1, 2, 3, 7], "0-3,7"), ([9, 10, 0, 1, 1, 4], "0-1,4,9-10"), (range(1000), "0-999")],
)
def test_format_indices(indices: list[int], text: str) -> None:
    assert format_indices(indices) == text


def expand_tasks(text: str) -> set[str]:
    """The array tasks that squeue's short form names (``7_[0-2,5], 8_3``), for checking ``format_tasks``."""
    out: set[str] = set()
    for part in filter(None, text.split(", ")):
        job, _, rest = part.partition("_")
        if not rest:
            out.add(job)
            continue
        for piece in rest.strip("[]").split(","):
            low, _, high = piece.partition("-")
            out.update(f"{job}_{i}" for i in range(int(low), int(high or low) + 1))
    return out


@given(st.sets(st.tuples(st.integers(1, 30), st.integers(0, 40))), st.sets(st.integers(1, 30)))
def test_format_tasks_names_every_task_once(tasks: set[tuple[int, int]], jobs: set[int]) -> None:
    """A refusal that counts N busy tasks names exactly those N: ``format_tasks`` loses and invents none."""
    names = [f"{j}_{i}" for j, i in tasks] + [str(j) for j in jobs]
    text = format_tasks(names)
    assert expand_tasks(text) == set(names)
    assert (
        format_tasks(["393_0", "393_1", "393_2", "394_5", "395_0", "395_2", "12"]) == "393_[0-2], 394_5, 395_[0,2], 12"
    )


@pytest.mark.parametrize(
    ("total", "size", "tasks", "chunks"),
    [
        (25, 11, None, [(0, 11), (11, 11), (22, 3)]),
        (10, 1001, None, [(0, 10)]),
        (1001, 1001, None, [(0, 1001)]),
        (1002, 1001, None, [(0, 1001), (1001, 1)]),
        (5000, 1001, 300, [(o, 300) for o in range(0, 4800, 300)] + [(4800, 200)]),
    ],
)
def test_split_shards_keeps_indices_below_the_limit(
    total: int, size: int, tasks: int | None, chunks: list[tuple[int, int]]
) -> None:
    result = split_shards(total, size, tasks)
    assert [(c.offset, c.size) for c in result] == chunks
    assert sorted(s for c in result for s in c.shards) == list(range(total)), "every shard exactly once"
    assert all(c.size - 1 < size for c in result)


def test_parse_array_limits() -> None:
    text = "MaxArraySize            = 11\nSchedulerParameters     = batch_sched_delay=0,max_array_tasks=5\n"
    assert parse_array_limits(text) == (11, 5)
    assert parse_array_limits("MaxArraySize = 1001\n") == (1001, None)


def test_rendered_directives_for_a_representative_set_of_options() -> None:
    opts = SubmitOptions(
        script="/w/curate.py",
        script_args=("--input", "in dir", "--output", "out"),
        shards=25,
        run_dir="/w/out/.curator-run",
        throttle=4,
        time="2:00:00",
        partition="cpu",
        cpus_per_task=8,
        mem="16G",
        gpus_per_task=1,
        job_name="curate",
        output_logs="/w/logs",
        signal="B:USR1@300",
        requeue=True,
        sbatch_args=("--account=proj", "--qos=low"),
        env_setup=("source /w/venv/bin/activate",),
        python="/w/venv/bin/python",
        workdir="/w",
    )
    script = render_script(opts, ArrayChunk(offset=11, size=11))
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert directives == [
        "#SBATCH --job-name=curate",
        "#SBATCH --array=0-10%4",
        "#SBATCH --output=/w/logs/%A_%a.log",
        "#SBATCH --time=2:00:00",
        "#SBATCH --partition=cpu",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=16G",
        "#SBATCH --gpus-per-task=1",
        "#SBATCH --signal=B:USR1@300",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        "#SBATCH --account=proj",
        "#SBATCH --qos=low",
    ]
    body = script.split("\n\n", 1)[1]
    assert "source /w/venv/bin/activate\n" in body
    for export in (
        "export CURATOR_NUM_SHARDS=25",
        "export CURATOR_SHARD_OFFSET=11",
        "export CURATOR_RUN_DIR=/w/out/.curator-run",
        "export CURATOR_REQUEUE=1",
    ):
        assert export + "\n" in body
    assert body.rstrip().endswith("exec /w/venv/bin/python /w/curate.py --input 'in dir' --output out")
    assert body.index("source /w/venv") < body.index("export CURATOR_NUM_SHARDS") < body.index("exec ")


def test_multi_node_tasks_start_and_stop_a_ray_cluster() -> None:
    opts = SubmitOptions(script="/w/c.py", shards=4, run_dir="/w/run", nodes_per_task=3, python="/v/bin/python")
    script = render_script(opts, ArrayChunk(0, 4))
    assert "#SBATCH --nodes=3" in script and "#SBATCH --ntasks-per-node=1" in script
    assert "/v/bin/ray start --head" in script and "--address=" in script
    assert 'export RAY_ADDRESS="$head:$port"' in script and 'export CURATOR_RAY_NODES="${#nodes[@]}"' in script
    assert "/dev/tcp/$head/$port" in script and "sleep 10" not in script, "waits for the head, not a fixed time"
    assert "/v/bin/ray stop" not in script, "ray stop would end the Ray of every task on the node"
    assert script.index("ray start --head") < script.index("/v/bin/python /w/c.py") < script.rindex("kill $(jobs -p)")
    bash = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert bash.returncode == 0, bash.stderr


@pytest.mark.slurm
@requires_ray
def test_multi_node_tasks_run_on_their_own_ray_cluster_and_leave_nothing_behind(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    """The --nodes-per-task script for real, on this one-node cluster (`--nodes=1` overrides the
    directive): two tasks share the node, each starts its own Ray head, its pipeline joins it, and once
    done nothing of either Ray is left running, nor its temporary directory."""
    reference, out = tmp_path / "reference", tmp_path / "out"
    run_example(corpus, reference, "--workers", "1")
    proc = cli("submit", str(EXAMPLE), "--shards", "2", "--nodes-per-task", "2", "--cpus-per-task", "1",
               "--sbatch-arg=--nodes=1", "--", "--input", str(corpus), "--output", str(out), "--executor", "ray",
               cwd=tmp_path, check=True)  # fmt: skip
    (job,) = _job_ids(proc.stdout)
    assert wait_for_job(job, timeout=600) == {"0": "COMPLETED", "1": "COMPLETED"}
    assert read_tree(out) == read_tree(reference)
    logs = "".join(p.read_text() for p in (out / DEFAULT_RUN_DIR_NAME / "logs").iterdir())
    ports = re.findall(r"ray: using the Ray cluster at [\w.-]+:(\d+) \(1 node\(s\)\)", logs)
    assert len(set(ports)) == 2, logs
    job_ids = {str(r["job_id"]) for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME))}
    assert len(job_ids) == 2
    for task_job in job_ids:
        assert not list(Path("/tmp").glob(f"curator-ray-{task_job}-*")), "a node's Ray directory outlived the task"
        left = subprocess.run(["pgrep", "-f", f"curator-ray-{task_job}"], capture_output=True, text=True)
        assert left.stdout == "", f"Ray processes of job {task_job} outlived it: {left.stdout}"


# --- commands without Slurm -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["submit", "status", "failures", "retry", "plan", "local", "shard"])
def test_every_command_has_help(command: str) -> None:
    proc = cli(command, "--help", check=True)
    assert f"usage: curator-slurm {command}" in proc.stdout
    if command in EXAMPLES:
        assert "examples:" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["submit", "nope.py", "--shards", "2"], "nope.py: no such pipeline script"),
        (["submit", str(EXAMPLE), "--shards", "0"], "--shards 0: must be >= 1"),
        (["status", "/nonexistent/run"], "/nonexistent/run: no such run directory"),
        (["failures", "/nonexistent/run"], "/nonexistent/run: no such run directory"),
        (["local", "nope.py", "--shards", "2"], "nope.py: no such pipeline script"),
        (["plan", str(EXAMPLE), "--shards", "3", "--", "--input", "/nonexistent", "--output", "/tmp/x"], "failed"),
    ],
)
def test_bad_input_exits_non_zero_with_one_line(args: list[str], message: str) -> None:
    proc = cli(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_local_shards_give_the_unsharded_outputs(corpus: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    run_example(corpus, reference, "--workers", "1")
    out, logs = tmp_path / "out", tmp_path / "logs"
    proc = cli(
        "local", str(EXAMPLE), "--shards", "4", "--logs", str(logs), "--",
        "--input", str(corpus), "--output", str(out), "--workers", "1",
        check=True,
    )  # fmt: skip
    assert "all 4 shards finished" in proc.stdout
    assert read_tree(out) == read_tree(reference)
    for i in range(4):
        assert f"shard {i}/4: kept " in (logs / f"shard-{i}.log").read_text()


def test_local_reports_failed_shards(tmp_path: Path) -> None:
    broken = tmp_path / "in"
    broken.mkdir()
    (broken / "a.jsonl").write_text('{"text": "x"}\n{"text": \n')
    proc = cli("local", str(EXAMPLE), "--shards", "2", "--logs", str(tmp_path / "logs"), "--",
               "--input", str(broken), "--output", str(tmp_path / "out"))  # fmt: skip
    assert proc.returncode == 1
    assert "1 of 2 shards failed" in proc.stderr


def test_plan_shows_balanced_is_more_even_on_skewed_inputs(tmp_path: Path) -> None:
    corpus = tmp_path / "skewed"
    make_corpus(str(corpus), files=160, docs_per_file=20, seed=3, skew=1.5)
    proc = cli("plan", str(EXAMPLE), "--shards", "8", "--json", "--", "--input", str(corpus), "--output",
               str(tmp_path / "out"), check=True)  # fmt: skip
    plan = json.loads(proc.stdout)
    assert plan["source_tasks"] == 160
    hashed, balanced = plan["strategies"]["hash"], plan["strategies"]["balanced"]
    assert balanced["imbalance"] < hashed["imbalance"]
    assert balanced["imbalance"] <= 1.05
    assert not (tmp_path / "out").exists(), "plan reads and writes no data"
    text = cli("plan", str(EXAMPLE), "--shards", "8", "--", "--input", str(corpus), "--output", str(tmp_path / "o"))
    assert re.search(r"^balanced\s+\d+-\d+", text.stdout, re.MULTILINE)


def test_dry_run_prints_scripts_and_commands_without_submitting(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = cli("submit", str(EXAMPLE), "--shards", "3", "--time", "5:00", "--requeue", "--dry-run", "--",
               "--input", str(corpus), "--output", str(out), check=True)  # fmt: skip
    assert "#SBATCH --array=0-2" in proc.stdout and "#SBATCH --time=5:00" in proc.stdout
    assert "# command: sbatch --parsable" in proc.stdout
    assert f"export CURATOR_RUN_DIR={out / DEFAULT_RUN_DIR_NAME}" in proc.stdout
    assert not out.exists(), "a dry run submits and writes nothing"


# --- on the real cluster --------------------------------------------------------------------------


@pytest.fixture
def small_array_limit(slurm_cluster: str) -> Iterator[int]:
    """The cluster with MaxArraySize=11 for one test (slurmctld restarted), then back to the default."""
    up = REPO / "scripts" / "slurm-up.sh"
    subprocess.run(["bash", str(up), "--max-array-size", "11"], check=True, capture_output=True)
    try:
        assert max_array_size() == 11
        yield 11
    finally:
        subprocess.run(["bash", str(up)], check=True, capture_output=True)


def _job_ids(stdout: str) -> list[str]:
    return re.findall(r"(\d+) \(shards", stdout)


@pytest.mark.slurm
def test_submit_25_shards_under_max_array_size_11(small_array_limit: int, corpus: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    run_example(corpus, reference, "--workers", "1")
    out = tmp_path / "out"
    proc = cli("submit", str(EXAMPLE), "--shards", "25", "--", "--input", str(corpus), "--output", str(out),
               "--workers", "1", cwd=tmp_path, check=True)  # fmt: skip
    jobs = _job_ids(proc.stdout)
    assert len(jobs) == 3, proc.stdout
    for job in jobs:
        states = wait_for_job(job, timeout=600)
        assert set(states.values()) == {"COMPLETED"}, states
        assert max(int(k) for k in states) < small_array_limit
        assert all(r.get("ArrayTaskId") is None or "-" not in r["ArrayTaskId"] for r in show_job(job))
    assert sum(len(wait_for_job(j)) for j in jobs) == 25
    assert read_tree(out) == read_tree(reference)
    run_dir = out / DEFAULT_RUN_DIR_NAME
    assert len(list((run_dir / "logs").iterdir())) == 25, "one log per shard"
    status = json.loads(cli("status", str(run_dir), "--json", check=True).stdout)
    assert (status["done"], status["failed"], status["pending"], status["percent"]) == (12, 0, 0, 100.0)


@pytest.mark.slurm
def test_failures_then_retry_completes_only_the_missing_tasks(slurm_cluster: str, corpus: Path, tmp_path: Path) -> None:
    inp, out, reference = tmp_path / "in", tmp_path / "out", tmp_path / "reference"
    shutil.copytree(corpus, inp)
    run_example(inp, reference, "--workers", "1")  # output names derive from the input paths
    victims = sorted(inp.iterdir())[:2]
    saved = {v: v.read_bytes() for v in victims}
    lines = victims[0].read_text().splitlines()
    victims[0].write_text("\n".join([*lines[:3], "{broken", *lines[3:]]) + "\n")
    victims[1].write_bytes(b"")

    proc = cli("submit", str(EXAMPLE), "--shards", "4", "--", "--input", str(inp), "--output", str(out),
               "--workers", "1", cwd=tmp_path, check=True)  # fmt: skip
    (job,) = _job_ids(proc.stdout)
    states = wait_for_job(job, timeout=600)
    assert "FAILED" in states.values()
    run_dir = out / DEFAULT_RUN_DIR_NAME

    status = cli("status", str(run_dir))
    assert status.returncode == 1, "status exits non-zero while tasks have failed"
    assert "12 total, 10 done, 2 failed, 0 pending" in status.stdout
    failures = cli("failures", str(run_dir), check=True).stdout
    assert "2 failed source task(s)" in failures
    assert f"{victims[0]}:4: malformed JSON" in failures and f"{victims[1]}: file is empty" in failures
    logs = re.findall(r"log: +(\S+)", failures)
    assert len(logs) == 2 and all(Path(p).is_file() for p in logs)
    assert "Traceback" in cli("failures", str(run_dir), "--traceback", check=True).stdout

    for victim, content in saved.items():
        victim.write_bytes(content)
    done_before = load_status(str(run_dir)).done
    retry = cli("retry", str(run_dir), cwd=tmp_path, check=True)
    assert "retrying 2 of 12 source tasks" in retry.stdout and "with 1 shard(s)" in retry.stdout
    (retry_job,) = _job_ids(retry.stdout)
    assert wait_for_job(retry_job, timeout=600) == {"0": "COMPLETED"}
    after = load_status(str(run_dir))
    assert len(after.done) == 12 and not after.failed
    retry_log = next((run_dir / "logs").glob(f"{retry_job}_0.log")).read_text()
    assert "kept 2 of 2 source tasks" in retry_log, "the retry array works only on the frozen list"
    assert done_before < after.done
    assert read_tree(out) == read_tree(reference)
    status = json.loads(cli("status", str(run_dir), "--json", check=True).stdout)
    assert status["percent"] == 100.0 and status["failed"] == 0
    assert "nothing to retry" in cli("retry", str(run_dir), check=True).stdout


@pytest.mark.slurm
def test_retry_refuses_while_jobs_run(slurm_cluster: str, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    hold = cli("submit", str(EXAMPLE), "--shards", "2", "--sbatch-arg=--hold", "--", "--input", str(corpus),
               "--output", str(out), cwd=tmp_path, check=True)  # fmt: skip
    (job,) = _job_ids(hold.stdout)
    try:
        proc = cli("retry", str(out / DEFAULT_RUN_DIR_NAME))
        assert proc.returncode == 2
        assert "still queued or running" in proc.stderr and "--force" in proc.stderr
    finally:
        subprocess.run(["scancel", job], check=False)


@pytest.mark.slurm
def test_submit_from_inside_an_srun_step_still_splits_n_ways(slurm_cluster: str, corpus: Path, tmp_path: Path) -> None:
    """Variables of the shell that submits (an srun rank, a stray shard index) never reach the tasks."""
    out = tmp_path / "out"
    leaked = {"SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "0", "CURATOR_SHARD_INDEX": "1"}
    proc = cli("submit", str(EXAMPLE), "--shards", "2", "--strategy", "balanced", "--", "--input", str(corpus),
               "--output", str(out), "--workers", "1", cwd=tmp_path, check=True, env=leaked)  # fmt: skip
    (job,) = _job_ids(proc.stdout)
    assert wait_for_job(job, timeout=300) == {"0": "COMPLETED", "1": "COMPLETED"}
    logs = "".join(p.read_text() for p in (out / DEFAULT_RUN_DIR_NAME / "logs").iterdir())
    kept = [int(n) for n in re.findall(r"shard \d/2: kept (\d+) of 12", logs)]
    assert kept == [6, 6], logs  # balanced over 12 equal-sized files
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == 12


@pytest.mark.slurm
def test_status_watch_ends_when_no_job_is_left(slurm_cluster: str, corpus: Path, tmp_path: Path) -> None:
    """Tasks that die before recording anything leave work pending; --watch stops once no job runs."""
    out = tmp_path / "out"
    proc = cli("submit", str(EXAMPLE), "--shards", "2", "--env-setup", "exit 3", "--", "--input", str(corpus),
               "--output", str(out), cwd=tmp_path, check=True)  # fmt: skip
    (job,) = _job_ids(proc.stdout)
    assert set(wait_for_job(job, timeout=300).values()) == {"FAILED"}
    watch = cli("status", str(out / DEFAULT_RUN_DIR_NAME), "--watch", "0.5")
    assert watch.returncode == 1
    assert "12 pending" in watch.stdout and "no job of this run is queued or running" in watch.stdout


def test_requeue_without_signal_asks_for_a_warning_signal() -> None:
    opts = SubmitOptions(script="/w/c.py", shards=2, run_dir="/w/run", requeue=True)
    script = render_script(opts, ArrayChunk(0, 2))
    assert "#SBATCH --signal=B:USR1@120" in script and "#SBATCH --requeue" in script
    given = render_script(SubmitOptions(script="/w/c.py", shards=2, run_dir="/w/run", requeue=True,
                                        signal="B:USR2@600"), ArrayChunk(0, 2))  # fmt: skip
    assert "#SBATCH --signal=B:USR2@600" in given and "B:USR1@120" not in given


def test_status_of_an_output_directory_is_that_of_its_run_directory(corpus: Path, tmp_path: Path) -> None:
    """`status OUT` (the directory the user named) means OUT/.curator-run; a directory that holds no run in
    any of the places a run puts it is still refused, naming it."""
    out = tmp_path / "out"
    run_example(corpus, out, "--workers", "1")
    for command in ("status", "failures"):
        named, inner = cli(command, str(out)), cli(command, str(out / DEFAULT_RUN_DIR_NAME))
        assert named.returncode == inner.returncode == 0 and named.stdout == inner.stdout
    assert f"run directory {out / DEFAULT_RUN_DIR_NAME}" in cli("status", str(out)).stdout
    (tmp_path / "empty").mkdir()
    proc = cli("status", str(tmp_path / "empty"))
    assert proc.returncode == 2 and f"{tmp_path / 'empty'} is not a run directory" in proc.stderr


def submitted_run(corpus: Path, out: Path, planned: int, submission: dict[str, object]) -> Path:
    """A run directory as `submit` leaves it: a local run's ledger, a plan of ``planned`` task ids (the
    ledger's 12 done ones are not among them), and one recorded submission."""
    run_example(corpus, out, "--workers", "1")
    run_dir = out / DEFAULT_RUN_DIR_NAME
    plan = {"tasks": [[f"t{i}", 1] for i in range(planned)], "run_dir": str(run_dir), "has_bytes": False}
    (run_dir / "plan.json").write_text(json.dumps(plan))
    (run_dir / "submissions.jsonl").write_text(json.dumps(submission) + "\n")
    return run_dir


@pytest.mark.slurm
def test_status_watch_ends_when_slurm_has_forgotten_the_jobs(slurm_cluster: str, corpus: Path, tmp_path: Path) -> None:
    """Jobs older than MinJobAge are unknown to squeue: nothing of the run is queued any more."""
    run_dir = submitted_run(corpus, tmp_path / "out", 13, {"arrays": [{"job_id": "987654321"}], "options": {}})
    proc = cli("status", str(run_dir), "--watch", "0.2")
    assert proc.returncode == 1
    assert "no job of this run is queued or running" in proc.stdout


def test_damaged_run_dir_files_are_named_with_the_place_and_the_remedy(corpus: Path, tmp_path: Path) -> None:
    """A truncated plan.json or a torn line in submissions.jsonl (a full disk, an interrupted copy):
    status and retry name the file, the line and what to do, without a traceback."""
    submission = {"shards": 3, "arrays": [], "script": str(EXAMPLE), "script_args": [], "options": {}}
    run_dir = submitted_run(corpus, tmp_path / "out", 3, submission)
    plan = run_dir / "plan.json"
    good_plan = plan.read_text()
    plan.write_text(good_plan[: len(good_plan) // 2])
    for command in ("status", "retry"):
        proc = cli(command, str(run_dir), *(["--dry-run"] if command == "retry" else []))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert re.search(rf"{re.escape(str(plan))}:1:\d+: not valid JSON", proc.stderr), proc.stderr
        assert "delete it and submit the run again" in proc.stderr
    plan.write_text(good_plan)
    submissions = run_dir / "submissions.jsonl"
    submissions.write_text(submissions.read_text() + '{"shards": 3, "arr\n')
    proc = cli("status", str(run_dir))
    assert proc.returncode == 2
    assert f"{submissions}:2: not valid JSON" in proc.stderr and "repair or delete that line" in proc.stderr


def test_accept_new_inputs_reaches_every_task_of_a_submit_or_retry(corpus: Path, tmp_path: Path) -> None:
    """Inputs added after a submission make tasks refuse to run (test_ledger pins that and the
    variable that allows it); --accept-new-inputs puts that variable in the task scripts."""
    args = ["--input", str(corpus), "--output", str(tmp_path / "out"), "--workers", "1"]  # retry lists the work again
    submission = {"shards": 3, "arrays": [], "script": str(EXAMPLE), "script_args": args, "options": {}}
    run_dir = submitted_run(corpus, tmp_path / "out", 3, submission)
    for extra, expected in (([], False), (["--accept-new-inputs"], True)):
        proc = cli("retry", str(run_dir), "--dry-run", "--json", *extra, check=True)
        script = json.loads(proc.stdout)["arrays"][0]["script"]
        assert ("export CURATOR_ACCEPT_NEW_INPUTS=1\n" in script) is expected
    args = ["submit", str(EXAMPLE), "--shards", "2", "--dry-run", "--accept-new-inputs", "--"]
    proc = cli(*args, "--input", str(corpus), "--output", str(tmp_path / "o2"), check=True)
    assert proc.stdout.count("export CURATOR_ACCEPT_NEW_INPUTS=1\n") == 1


def test_retry_json_is_json(corpus: Path, tmp_path: Path) -> None:
    args = ["--input", str(corpus), "--output", str(tmp_path / "out"), "--workers", "1"]  # retry lists the work again
    submission = {"shards": 3, "arrays": [], "script": str(EXAMPLE), "script_args": args, "options": {}}
    run_dir = submitted_run(corpus, tmp_path / "out", 3, submission)
    proc = cli("retry", str(run_dir), "--dry-run", "--json", check=True)
    data = json.loads(proc.stdout)
    assert data["arrays"][0]["size"] == 3 and "CURATOR_MANIFEST" in data["arrays"][0]["script"]  # of the 3 left
    assert "retrying 3 of 3 source tasks" in proc.stderr
    assert not (run_dir / "retries").exists(), "a dry run writes nothing"


@pytest.mark.slurm
def test_status_lists_every_submitted_shard_also_those_that_had_no_work(
    slurm_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    """One input file, three shards: two tasks find nothing to do, and status still shows their rows
    and jobs (a missing row would look like a task that never ran)."""
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(sorted(corpus.glob("*.jsonl"))[0], one)
    out = tmp_path / "out"
    proc = cli("submit", str(EXAMPLE), "--shards", "3", "--cpus-per-task", "1", "--", "--input", str(one),
               "--output", str(out), "--workers", "1", cwd=tmp_path, check=True)  # fmt: skip
    (job,) = _job_ids(proc.stdout)
    assert wait_for_job(job, timeout=300) == {"0": "COMPLETED", "1": "COMPLETED", "2": "COMPLETED"}
    run_dir = str(out / DEFAULT_RUN_DIR_NAME)
    status = json.loads(cli("status", run_dir, "--json", check=True).stdout)
    rows = [(s["shard"], s["done"], s["failed"], s["job"]) for s in status["shards"]]
    assert [r[0] for r in rows] == ["0/3", "1/3", "2/3"] and [r[3] for r in rows] == [f"{job}_{i}" for i in range(3)]
    assert sorted(r[1] for r in rows) == [0, 0, 1] and status["done"] == 1 and status["pending"] == 0
    table = cli("status", run_dir, check=True).stdout.splitlines()
    assert [line.split()[0] for line in table if re.match(r"\s+\d/3 ", line)] == ["0/3", "1/3", "2/3"], table


def test_status_orders_shards_by_number_and_shows_the_newest_submission_of_each(corpus: Path, tmp_path: Path) -> None:
    """Two submissions of 24 shards and a retry of 3: every shard has a row, `2/24` sorts before
    `10/24` (in the full table and in the summary of a large run), and a shard that recorded nothing
    shows the array task of the newest submission that includes it."""
    out = tmp_path / "out"
    for index in (10, 2):  # balanced: 12 equal files over 24 shards, one each for shards 0-11
        run_example(corpus, out, "--workers", "1", env={"CURATOR_NUM_SHARDS": "24", "CURATOR_SHARD_INDEX": str(index),
                                                       "CURATOR_SHARD_STRATEGY": "balanced"})  # fmt: skip
    run_dir = out / DEFAULT_RUN_DIR_NAME
    subs = [(24, "900001"), (3, "900002"), (24, "900003")]
    records = [{"shards": n, "arrays": [{"job_id": job, "offset": 0, "size": n}], "options": {}} for n, job in subs]
    (run_dir / "submissions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    proc = cli("status", str(run_dir), "--json")
    assert proc.returncode == 1, "10 source tasks pending"
    status = json.loads(proc.stdout)
    rows = {s["shard"]: s for s in status["shards"]}
    assert [s["shard"] for s in status["shards"]] == [f"{i}/3" for i in range(3)] + [f"{i}/24" for i in range(24)]
    assert rows["5/24"]["job"] == "900003_5" and rows["1/3"]["job"] == "900002_1" and rows["5/24"]["done"] == 0
    assert rows["2/24"]["done"] == rows["10/24"]["done"] == 1
    summary = cli("status", str(run_dir)).stdout
    assert "the 5 slowest of 27" in summary, summary
    shown = [line.split()[0] for line in summary.splitlines() if re.match(r"\s+\d+/\d+ ", line)]
    assert len(shown) == 5 and shown.index("2/24") < shown.index("10/24"), summary

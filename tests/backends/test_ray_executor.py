"""RayExecutor honours LocalExecutor's contracts: same outputs, exactly once across shards, failures and
resume in the ledger, a killed worker costs an attempt (not the task), stop signals start nothing new,
and a run is quiet and cleans up after itself.

Ray is started once per test session (``ray_cluster`` in executors.py); in-process runs use it,
subprocesses join it through ``RAY_ADDRESS``, and one subprocess starts (and must shut down) a Ray of
its own. No test asserts on time: waits poll for an event, with a generous deadline.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError, ShardSpec
from curator_slurm.backends.ray import RayExecutor, fuse_stages, plan_pools, ray_address
from curator_slurm.backends.run import BaseExecutor
from curator_slurm.errors import SettingError
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.results import PipelineResult, SourceResult
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.runs.sharding import shard_of
from curator_slurm.runs.signals import GraceExpired
from curator_slurm.settings import RunOptions, ray_expected_nodes
from curator_slurm.stages import (
    JsonlReader,
    ParquetWriter,
    ProcessingStage,
    Resources,
    ScoreFilter,
    SymbolRatioFilter,
    WordCountFilter,
)
from curator_slurm.tasks import DocumentBatch, EmptyTask
from support.executors import HAVE_RAY, NO_RAY, ray_cluster_fixture, ship_test_module  # noqa: F401 - a fixture
from support.helpers import EXAMPLE, clean_env, logged, read_tree, records
from support.shared_stages import Tally, append_line
from support.tallying import tallied

pytestmark = pytest.mark.skipif(not HAVE_RAY, reason=NO_RAY)

#: Every line this project logs starts like this (curator_slurm.logs.FORMAT); anything else on stderr is
#: someone else's noise (Ray's "(raylet)" lines, "INFO worker.py:..." lines, its auth-token notice, ...).
OUR_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| (DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\s* \| ")


@pytest.fixture(scope="module", autouse=True)
def _ship_stages() -> None:
    """Ray workers cannot import this module by name; send its stage classes by value."""
    ship_test_module(sys.modules[__name__])


def curate(inp: Path, out: Path, *extra: ProcessingStage) -> Pipeline:
    """The demo job (examples/curate.py), with ``extra`` stages between the filters and the writer."""
    pipeline = (
        Pipeline("curate")
        .add_stage(JsonlReader(str(inp), files_per_partition=1))
        .add_stage(ScoreFilter(WordCountFilter(min_words=50), text_field="text", score_field="word_count"))
    )
    for stage in extra:
        pipeline.add_stage(stage)
    return pipeline.add_stage(ScoreFilter(SymbolRatioFilter(max_symbol_ratio=0.25))).add_stage(ParquetWriter(out))


def run(pipeline: Pipeline, executor: BaseExecutor, shard: ShardSpec | None = None) -> PipelineResult:
    return pipeline.run(executor, shard=shard or ShardSpec.single(), options=RunOptions())


def source_ids(corpus: Path) -> list[str]:
    return [t.task_id for t in JsonlReader(str(corpus)).decompose()[0].process(EmptyTask())]


class FailWhileFlagged(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Raises on ``victim`` while ``flag`` exists (deleting the flag is "fixing the bug"); tallies every
    task it completes."""

    def __init__(self, flag: str, tally: str, victim: str) -> None:
        self.flag, self.tally, self.victim = flag, tally, victim

    def params(self) -> dict[str, object]:
        return {}

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if task.source_id == self.victim and os.path.exists(self.flag):
            logging.getLogger("user_stage").warning(f"about to break on {task.source_id}")  # the user's own logger
            raise RuntimeError(f"broken on {task.source_id}")
        append_line(self.tally, task.source_id or "")
        return task


class KillWorker(ProcessingStage[DocumentBatch, DocumentBatch]):
    """SIGKILLs its own process on ``victim``: ``times`` times (counted in files, as the process dies)."""

    def __init__(self, marker_dir: str, victim: str, times: int) -> None:
        self.marker_dir, self.victim, self.times = marker_dir, victim, times

    def params(self) -> dict[str, object]:
        return {}

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if task.source_id == self.victim:
            kills = len(os.listdir(self.marker_dir))
            if kills < self.times:
                Path(self.marker_dir, f"kill-{kills}").write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
        return task


# --- pool sizing (no cluster needed) ------------------------------------------------------------------


def _stage(cpus: float = 1.0, gpus: float = 0.0, name: str = "s") -> ProcessingStage:
    return Tally("/dev/null").with_(name=name, resources=Resources(cpus=cpus, gpus=gpus))


def test_every_stage_may_use_the_whole_cluster_and_all_pools_fit() -> None:
    plans = plan_pools([_stage(name=n) for n in "abcd"], cluster_cpus=2)
    assert [p.actors for p in plans] == [2, 2, 2, 2]
    assert sum(p.actors * p.num_cpus for p in plans) <= 2
    assert all(p.num_cpus > 0 for p in plans)


def test_pools_follow_stage_resources_and_caps() -> None:
    plans = plan_pools([_stage(2.0), _stage(0.5), _stage(0.0)], cluster_cpus=8, max_in_flight=6)
    assert [p.actors for p in plans] == [4, 6, 6]  # 8/2; 8/0.5=16 capped by in-flight; free stages too
    assert sum(p.actors * p.num_cpus for p in plans) <= 8
    assert [p.actors for p in plan_pools([_stage(), _stage()], 8, max_actors_per_stage=3)] == [3, 3]
    gpu = plan_pools([_stage(1.0, 1.0)], cluster_cpus=32, cluster_gpus=4)
    assert gpu[0].actors == 4 and gpu[0].num_gpus == 1.0


def test_a_gpu_stage_without_gpus_is_refused_before_any_actor_starts() -> None:
    with pytest.raises(ValueError, match="stage 'classifier' asks for 1 GPU"):
        plan_pools([_stage(), _stage(gpus=1.0, name="classifier")], cluster_cpus=4, cluster_gpus=0)


def test_stages_with_equal_resources_share_a_pool_and_others_get_their_own() -> None:
    a, b, gpu, c, d = (
        _stage(name="a"),
        _stage(name="b"),
        _stage(1.0, 1.0, "gpu"),
        _stage(name="c"),
        _stage(0.5, name="d"),
    )
    groups = fuse_stages([a, b, gpu, c, d])
    assert [g.name for g in groups] == ["a+b", "gpu", "c", "d"]
    assert groups[0].stages == (a, b) and groups[1].resources == Resources(cpus=1.0, gpus=1.0)
    assert groups[0].describe() == "stages 'a', 'b'" and groups[1].describe() == "stage 'gpu'"
    assert [g.name for g in fuse_stages([a, b, gpu, c, d], fuse=False)] == ["a", "b", "gpu", "c", "d"]
    generous = fuse_stages([a.with_(max_retries=0), b.with_(max_retries=5)])[0]
    assert generous.max_retries == 5, "a death is charged to the group: it gets its most generous budget"
    assert [p.actors for p in plan_pools(groups, cluster_cpus=4, cluster_gpus=1)] == [4, 1, 4, 8]


def test_ray_address_comes_from_the_given_environment() -> None:
    assert ray_address({"RAY_ADDRESS": " 10.0.0.1:6379 "}) == "10.0.0.1:6379"
    assert ray_address({"RAY_ADDRESS": ""}) is None
    assert ray_address({}) is None
    assert ray_expected_nodes({"CURATOR_RAY_NODES": "4"}) == 4 and ray_expected_nodes({}) is None
    with pytest.raises(SettingError, match=r"CURATOR_RAY_NODES='0' must be >= 1"):
        ray_expected_nodes({"CURATOR_RAY_NODES": "0"})


# --- the executor's contracts -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_reference(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("local-reference")
    run(curate(corpus, out), LocalExecutor(workers=1))
    return read_tree(out)


def _counts(result: PipelineResult) -> list[tuple]:
    return [(s.name, s.tasks_in, s.tasks_out, s.rows_in, s.rows_out, s.failures) for s in result.stages]


CURATE_STAGES = ["jsonl_reader", "score_filter[word_count]", "score_filter[symbol_ratio]", "parquet_writer"]


def _pool_of(executor: RayExecutor, stage: str) -> list[int]:
    """The actor pids of the pool that ran ``stage`` (alone, or fused with others)."""
    (pids,) = [pids for name, pids in executor.actor_pids.items() if stage in name.split("+")]
    return pids


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "pool-per-stage"])
def test_same_outputs_and_counts_as_local(
    corpus: Path, tmp_path: Path, ray_cluster: str, local_reference: dict[str, bytes], fuse: bool
) -> None:
    local = run(curate(corpus, tmp_path / "local"), LocalExecutor(workers=1))
    executor = RayExecutor(fuse=fuse)
    result = run(curate(corpus, tmp_path / "ray"), executor)
    assert read_tree(tmp_path / "ray") == local_reference
    assert _counts(result) == _counts(local)
    assert [Path(f).name for f in result.output_files] == [Path(f).name for f in local.output_files]
    assert result.done == 12 and result.rows_in == 720
    # Fused: one pool runs every stage after the source; else one pool per stage. Each actor is its own
    # process, none of them the driver.
    pids = executor.actor_pids
    assert list(pids) == (["+".join(CURATE_STAGES)] if fuse else CURATE_STAGES)
    every = [p for group in pids.values() for p in group]
    assert len(set(every)) == len(every) and os.getpid() not in every


def test_shards_together_do_everything_exactly_once(
    corpus: Path, tmp_path: Path, ray_cluster: str, local_reference: dict[str, bytes]
) -> None:
    out = tmp_path / "out"
    owned: list[set[str]] = []
    for index in range(3):
        result = run(curate(corpus, out), RayExecutor(max_actors_per_stage=1), ShardSpec.explicit(index, 3))
        owned.append({Path(f).name for f in result.output_files})
    assert sum(len(o) for o in owned) == len(set().union(*owned)) == 12, "disjoint and complete"
    # Each shard did exactly its own tasks (ids hash the corpus's temporary path, so how many each
    # shard gets varies from run to run, and one may get none).
    assert owned == [{f"{t}.parquet" for t in source_ids(corpus) if shard_of(t, 3) == i} for i in range(3)]
    assert read_tree(out) == local_reference


def test_failure_is_recorded_then_a_rerun_does_only_that_task(corpus: Path, tmp_path: Path, ray_cluster: str) -> None:
    out, flag, tally = tmp_path / "out", tmp_path / "broken", tmp_path / "tally"
    flag.touch()
    victim = source_ids(corpus)[4]
    stage = FailWhileFlagged(str(flag), str(tally), victim).with_(max_retries=2)
    pipeline = curate(corpus, out, stage)

    with (
        logged(logging.WARNING) as lines,
        pytest.raises(PipelineFailedError, match="1 of 12 source tasks failed") as info,
    ):
        run(pipeline, RayExecutor(retry_backoff=0.001, max_actors_per_stage=1))
    retried = [line for line in lines if f"failed on task {victim}" in line]
    assert [r.split("(attempt ")[1][0] for r in retried] == ["1", "2", "3"], "worker warnings reach the driver's log"
    assert [r.endswith("; retrying") for r in retried] == [True, True, False]
    assert lines.count(f"about to break on {victim}") == 3, "a stage's own logger reaches the driver too"
    assert info.value.result.done == 11  # type: ignore[attr-defined]
    state = load_status(str(out / DEFAULT_RUN_DIR_NAME))
    assert len(state.done) == 11 and victim not in state.done
    assert list(state.failed) == [victim]
    record = state.failed[victim]
    assert record["attempts"] == 3 and record["stage"] == "fail_while_flagged"
    assert f"RuntimeError: broken on {victim}" in record["error"] and "Traceback" in record["traceback"]
    assert "WorkerDied" not in record["error"]

    flag.unlink()
    before = len(tallied(tally))
    again = run(pipeline, RayExecutor(max_actors_per_stage=1))
    assert again.done == 1 and again.source_tasks_skipped == 11
    assert tallied(tally)[before:] == [victim], "only the failed task ran again"
    assert load_status(str(out / DEFAULT_RUN_DIR_NAME)).done == set(source_ids(corpus))

    third = run(pipeline, RayExecutor())
    assert third.source_tasks_skipped == 12 and third.done == 0
    assert len(tallied(tally)) == before + 1


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "pool-per-stage"])
def test_a_killed_worker_costs_one_attempt_and_is_replaced(
    corpus: Path, tmp_path: Path, ray_cluster: str, local_reference: dict[str, bytes], fuse: bool
) -> None:
    out, markers = tmp_path / "out", tmp_path / "kills"
    markers.mkdir()
    victim = source_ids(corpus)[7]
    executor = RayExecutor(retry_backoff=0.001, max_actors_per_stage=1, fuse=fuse)
    result = run(curate(corpus, out, KillWorker(str(markers), victim, times=1)), executor)

    killed = int((markers / "kill-0").read_text())
    assert killed in _pool_of(executor, "kill_worker"), "the process that died was one of the stage's actors"
    assert len(_pool_of(executor, "kill_worker")) == 2, "a replacement actor took over"
    assert executor.deaths == 1
    with pytest.raises(ProcessLookupError):
        os.kill(killed, 0)
    assert result.done == 12 and not result.failed
    assert read_tree(out) == local_reference
    attempts = {r["source"]: r["attempts"] for r in records(out)}
    assert attempts[victim] == 2
    assert {a for s, a in attempts.items() if s != victim} == {1}


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "pool-per-stage"])
def test_a_task_that_always_kills_its_worker_is_recorded_failed(
    corpus: Path, tmp_path: Path, ray_cluster: str, fuse: bool
) -> None:
    out, markers = tmp_path / "out", tmp_path / "kills"
    markers.mkdir()
    victim = source_ids(corpus)[2]
    stage = KillWorker(str(markers), victim, times=99).with_(max_retries=1)
    with pytest.raises(PipelineFailedError, match="1 of 12 source tasks failed") as info:
        run(curate(corpus, out, stage), RayExecutor(retry_backoff=0.001, max_actors_per_stage=1, fuse=fuse))
    # Fused, the death is charged to the pool's stages together, whose budget is their largest (the
    # default max_retries=2 of the others): three attempts. A pool of its own: kill_worker's one retry.
    attempts = 3 if fuse else 2
    assert len(os.listdir(markers)) == attempts, "one dead worker per attempt"
    state = load_status(str(out / DEFAULT_RUN_DIR_NAME))
    assert list(state.failed) == [victim] and len(state.done) == 11
    record = state.failed[victim]
    pool = "+".join([*CURATE_STAGES[:2], "kill_worker", *CURATE_STAGES[2:]]) if fuse else "kill_worker"
    assert record["attempts"] == attempts and record["stage"] == pool
    running = "stages 'jsonl_reader', 'score_filter[word_count]'" if fuse else "stage 'kill_worker'"
    assert record["error"].startswith(f"WorkerDied: the Ray worker process running {running}")
    assert record["task_id"] == victim and len(record["files"]) == 1
    assert info.value.result.failed[0].stage == pool  # type: ignore[attr-defined]


def test_stop_starts_no_new_source_task_and_in_flight_work_is_bounded(
    corpus: Path, tmp_path: Path, ray_cluster: str
) -> None:
    """Calls process_sources as BaseExecutor.execute does, with a stop that comes after the first result."""
    events = tmp_path / "events"
    stages = Pipeline(
        "bounded",
        [
            JsonlReader(str(corpus)),
            Tally(str(events), "start"),
            ScoreFilter(WordCountFilter(min_words=50)),
            Tally(str(events), "end", sleep=0.05),
        ],
    ).build()
    sources = JsonlReader(str(corpus)).decompose()[0].process(EmptyTask())
    for s in sources:
        s.source_id = s.task_id
    results: list[SourceResult] = []
    stop: Callable[[], bool] = lambda: len(results) >= 3  # noqa: E731
    for result in RayExecutor(max_in_flight=2).process_sources(stages[1:], sources, ShardSpec.single(), stop):
        results.append(result)

    lines = [line.split() for line in events.read_text().splitlines()]
    started = {s for kind, s in lines if kind == "start"}
    assert {r.source_id for r in results} == started, "every started task finished and was reported"
    assert 3 <= len(results) < 12, "nothing new started after the stop"
    open_now = peak = 0
    for kind, _ in lines:
        open_now += 1 if kind == "start" else -1
        peak = max(peak, open_now)
    assert peak <= 2, f"max_in_flight=2 but {peak} source tasks were in flight"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_grace_expired_kills_the_actors_and_keeps_ray(corpus: Path, tmp_path: Path, ray_cluster: str) -> None:
    """GraceExpired (like KeyboardInterrupt or GeneratorExit) in the driver: no actor outlives the run,
    even while the exception's traceback still holds the run's frames (and so its actor handles), and a
    Ray this executor did not start stays up."""
    import ray

    stages = Pipeline("p", [JsonlReader(str(corpus)), Tally(str(tmp_path / "t"), sleep=0.2)]).build()
    sources = JsonlReader(str(corpus)).decompose()[0].process(EmptyTask())
    executor = RayExecutor()
    run_ = executor.process_sources(stages[1:], sources, ShardSpec.single(), lambda: False)
    next(run_)
    pids = [p for group in executor.actor_pids.values() for p in group]
    assert pids and all(_alive(p) for p in pids)
    with pytest.raises(GraceExpired) as info:
        run_.throw(GraceExpired())
    assert info.traceback  # kept alive on purpose until the actors are gone
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, "actors still alive 30 s after the run was abandoned"
        time.sleep(0.1)
    assert ray.is_initialized() and ray.cluster_resources().get("CPU") == 2


# --- as a user runs it ---------------------------------------------------------------------------------


def _run_curate(inp: Path, out: Path, executor: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # As from a user's shell: no RAY_ADDRESS unless given, and no RAY_AUTH_MODE (ray.init set it in this
    # process; a driver joining a token-protected cluster must manage without it, as after `ray start`).
    environment = {k: v for k, v in clean_env(env).items() if k != "RAY_AUTH_MODE" and (k != "RAY_ADDRESS" or k in env)}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--input", str(inp), "--output", str(out), "--executor", executor],
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"curate.py --executor {executor} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _foreign_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and not OUR_LOG_LINE.match(line)]


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{pid}: {cmdline[:200]}")
    return found


def test_example_starts_its_own_ray_quietly_and_cleans_up(
    corpus: Path, tmp_path: Path, local_reference: dict[str, bytes]
) -> None:
    proc = _run_curate(corpus, tmp_path / "ray", "ray", {})
    assert read_tree(tmp_path / "ray") == local_reference
    assert not _foreign_lines(proc.stderr), "Ray's own output reached the console"
    started = re.search(r"ray: using a local Ray \(\d+ CPUs, files in (\S+)\)", proc.stderr)
    assert started, proc.stderr
    temp_dir = started.group(1)
    assert re.fullmatch(r"/tmp/curator-ray-\d+", temp_dir)
    assert not os.path.exists(temp_dir), "a clean run removes the Ray files it made"
    assert not _processes_mentioning(temp_dir), "the Ray it started is shut down"


def test_example_joins_ray_address_and_leaves_that_cluster_running(
    corpus: Path, tmp_path: Path, ray_cluster: str, local_reference: dict[str, bytes]
) -> None:
    import ray

    proc = _run_curate(corpus, tmp_path / "ray", "ray", {"RAY_ADDRESS": ray_cluster, "CURATOR_RAY_NODES": "1"})
    assert read_tree(tmp_path / "ray") == local_reference
    assert f"ray: using the Ray cluster at {ray_cluster} (1 node(s))" in proc.stderr
    assert not _foreign_lines(proc.stderr)
    assert ray.is_initialized() and ray.cluster_resources().get("CPU") == 2, "the joined cluster is still up"


NODE_WAIT_SCRIPT = """
import sys
from curator_slurm import Pipeline
from curator_slurm.backends.ray import RayExecutor
from curator_slurm.stages import JsonlReader, ParquetWriter

if __name__ == "__main__":
    pipeline = Pipeline("wait").add_stage(JsonlReader(sys.argv[1])).add_stage(ParquetWriter(sys.argv[2]))
    print(pipeline.run(RayExecutor(node_wait_seconds=2)).done)
"""


def test_a_node_that_never_joins_fails_the_run_in_the_wait_time(corpus: Path, tmp_path: Path, ray_cluster: str) -> None:
    """A multi-node task exports how many nodes it started; the pipeline waits for them (here for 2 s),
    then fails, saying which nodes joined, before any work is done (a task that went on without a node
    would idle its CPUs while its `ray start` loops, e.g. on a token it was not given)."""
    script = tmp_path / "wait.py"
    script.write_text(NODE_WAIT_SCRIPT)
    env = clean_env({"RAY_ADDRESS": ray_cluster, "CURATOR_RAY_NODES": "2"})
    env.pop("RAY_AUTH_MODE", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(corpus), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode != 0 and proc.stdout == "", proc.stderr
    assert "RayNodesMissingError" in proc.stderr
    joined = f"ray: only 1 of 2 nodes (CURATOR_RAY_NODES) joined the Ray cluster at {ray_cluster} within 2 s"
    assert joined in proc.stderr


SIGTERM_SCRIPT = """
import os, sys, time
from curator_slurm import Pipeline, PipelineFailedError, configure_logging
from curator_slurm.backends.ray import RayExecutor
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage

class Slow(ProcessingStage):
    def __init__(self, tally):
        self.tally = tally
    def params(self):
        return {}
    def process(self, task):
        time.sleep(0.4)
        fd = os.open(self.tally, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, (task.source_id + "\\n").encode())
        os.close(fd)
        return task

configure_logging()
inp, out, tally = sys.argv[1:4]
pipeline = Pipeline("slow").add_stage(JsonlReader(inp)).add_stage(Slow(tally)).add_stage(ParquetWriter(out))
try:
    pipeline.run(RayExecutor(max_in_flight=2))
except PipelineFailedError as e:
    print(e, file=sys.stderr)
    sys.exit(1)
"""


def test_sigterm_lets_in_flight_tasks_finish_and_records_them(corpus: Path, tmp_path: Path, ray_cluster: str) -> None:
    """ray.init replaces the driver's SIGTERM handler with an immediate exit; the executor must put the
    stop-signal handler back, so SIGTERM means "finish what is in flight, start nothing new"."""
    script, out, tally = tmp_path / "slow.py", tmp_path / "out", tmp_path / "tally"
    script.write_text(SIGTERM_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(corpus), str(out), str(tally)],
        env=clean_env({"RAY_ADDRESS": ray_cluster}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while len(tallied(tally)) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "received SIGTERM" in err and "stopped by SIGTERM" in err
    done = load_status(str(out / DEFAULT_RUN_DIR_NAME)).done
    assert done == set(tallied(tally)), "every task that started before the signal finished and was recorded"
    assert 2 <= len(done) < 12
    assert sorted(p.name for p in out.glob("*.parquet")) == sorted(f"{s}.parquet" for s in done)


def test_pipeline_without_tasks_never_starts_ray(tmp_path: Path) -> None:
    """A shard with nothing to do (or a re-run with everything done) must not pay Ray's start-up."""
    import ray

    was_running = ray.is_initialized()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"text": "x"}\n')
    executor = RayExecutor()
    pipeline = Pipeline("p").add_stage(JsonlReader(str(tmp_path / "in"))).add_stage(ParquetWriter(tmp_path / "out"))
    result = run(pipeline, executor, ShardSpec.explicit(1 - _shard_of_only_task(tmp_path / "in"), 2))
    assert result.source_tasks_mine == 0 and result.done == 0
    assert executor.actor_pids == {} and ray.is_initialized() == was_running


def _shard_of_only_task(inp: Path) -> int:
    from curator_slurm.runs.sharding import shard_of

    (only,) = source_ids(inp)
    return shard_of(only, 2)

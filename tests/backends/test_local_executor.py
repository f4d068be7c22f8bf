"""LocalExecutor specifics: identical outputs for any worker count, and workers that die."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest

from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError, ShardSpec, Task
from curator_slurm.backends.local import choose_start_method
from curator_slurm.runs.ledger import iter_records, load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage, ScoreFilter, WordCountFilter
from curator_slurm.tasks import DocumentBatch, EmptyTask
from support.helpers import clean_env, read_tree


class DieOn(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Ends its own worker process (as the OOM killer would) on one source task, ``times`` times."""

    def __init__(self, victim: str, marker_dir: str, times: int) -> None:
        self.victim, self.marker_dir, self.times = victim, marker_dir, times

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if task.source_id == self.victim:
            deaths = len(os.listdir(self.marker_dir))
            if deaths < self.times:
                Path(self.marker_dir, f"death-{deaths}").touch()
                os._exit(9)
        return task


def pipeline(corpus: Path, out: Path, *extra: ProcessingStage) -> Pipeline:
    p = Pipeline("local").add_stage(JsonlReader(str(corpus)))
    for stage in extra:
        p.add_stage(stage)
    return p.add_stage(ScoreFilter(WordCountFilter(min_words=50))).add_stage(ParquetWriter(out))


def first_source(corpus: Path) -> str:
    return JsonlReader(str(corpus)).decompose()[0].process(EmptyTask())[0].task_id


@pytest.fixture(scope="module")
def reference(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("reference")
    pipeline(corpus, out).run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions())
    return read_tree(out)


@pytest.mark.parametrize("workers", [2, 3])
def test_any_worker_count_writes_the_same_files(
    corpus: Path, tmp_path: Path, reference: dict[str, bytes], workers: int
) -> None:
    result = pipeline(corpus, tmp_path).run(
        LocalExecutor(workers=workers), shard=ShardSpec.single(), options=RunOptions()
    )
    assert result.done == 12
    assert read_tree(tmp_path) == reference


def test_a_worker_that_dies_once_loses_nothing(corpus: Path, tmp_path: Path, reference: dict[str, bytes]) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "out"
    stage = DieOn(first_source(corpus), str(markers), times=1)
    result = pipeline(corpus, out, stage).run(LocalExecutor(workers=2), shard=ShardSpec.single(), options=RunOptions())
    assert len(os.listdir(markers)) == 1, "the worker really died"
    assert result.done == 12 and not result.failed
    assert read_tree(out) == reference


def test_a_task_that_always_kills_its_worker_is_recorded_failed(corpus: Path, tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "out"
    victim = first_source(corpus)
    with pytest.raises(PipelineFailedError, match="1 of 12 source tasks failed") as info:
        pipeline(corpus, out, DieOn(victim, str(markers), times=99)).run(
            LocalExecutor(workers=2, max_crashes=3), shard=ShardSpec.single(), options=RunOptions()
        )
    assert info.value.result.done == 11
    failed = load_status(str(out / DEFAULT_RUN_DIR_NAME)).failed
    assert list(failed) == [victim]
    assert failed[victim]["error"].startswith("WorkerDied: the worker process died 3 times")
    assert failed[victim]["attempts"] == 3
    assert len(os.listdir(markers)) == 3


class RandomSource(ProcessingStage[EmptyTask, Task]):
    def process(self, task: EmptyTask) -> list[Task]:
        return [Task(data=i) for i in range(3)]  # no task_id: random ids


class Keep(ProcessingStage[Task, Task]):
    def process(self, task: Task) -> Task:
        return task


def test_random_ids_without_sharding_skip_the_run_dir(tmp_path: Path) -> None:
    """Unsharded runs may use random ids; progress then cannot be recorded, and re-runs still work."""
    for _ in range(2):
        result = Pipeline("r", [RandomSource(), Keep()]).run(
            LocalExecutor(workers=1), shard=ShardSpec.single(), run_dir=tmp_path / "run", options=RunOptions()
        )
        assert len(result.output_tasks) == 3 and result.run_dir is None
    assert not (tmp_path / "run").exists()


UNGUARDED = """
from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.stages import JsonlReader, ParquetWriter
Pipeline('p').add_stage(JsonlReader({inp!r})).add_stage(ParquetWriter({out!r})).run(LocalExecutor(workers=2{extra}))
"""


def test_a_script_without_main_guard_works_with_forked_workers_and_gets_a_clear_error_when_spawned(
    corpus: Path, tmp_path: Path
) -> None:
    """Spawned workers re-import the script; without `if __name__ == "__main__":` they cannot start.
    Forked ones (the default where it is safe) never re-import it."""
    for name, extra in (("forked", ""), ("spawned", ", start_method='spawn'")):
        script = tmp_path / f"{name}.py"
        script.write_text(UNGUARDED.format(inp=str(corpus), out=str(tmp_path / name), extra=extra))
        proc = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=clean_env()
        )
        if name == "forked":
            assert proc.returncode == 0, proc.stderr
            assert "starting 2 worker processes by fork" in proc.stderr
            assert len(list((tmp_path / name).glob("*.parquet"))) == 12
            continue
        assert proc.returncode != 0
        assert "WorkerStartError" in proc.stderr and 'if __name__ == "__main__":' in proc.stderr
        assert "WorkerDied" not in proc.stderr, "no source task is blamed for it"


DIES_ONCE = """
import os, sys, threading, time
from pathlib import Path
from curator_slurm import LocalExecutor, Pipeline, configure_logging
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage, ScoreFilter, WordCountFilter


class DieOn(ProcessingStage):
    def __init__(self, victim, marker_dir):
        self.victim, self.marker_dir = victim, marker_dir

    def process(self, task):
        if task.source_id == self.victim and not os.listdir(self.marker_dir):
            Path(self.marker_dir, "death").write_text(str(os.getpid()))
            os._exit(9)
        return task


def main():
    inp, out, markers, victim, thread = sys.argv[1:6]
    configure_logging()
    if thread == "yes":  # a thread of the user's (a monitor, a client library): forking is no longer safe
        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
    pipeline = Pipeline("local").add_stage(JsonlReader(inp)).add_stage(DieOn(victim, markers))
    pipeline.add_stage(ScoreFilter(WordCountFilter(min_words=50))).add_stage(ParquetWriter(out))
    result = pipeline.run(LocalExecutor(workers=2))
    print(os.getpid(), result.done, len(result.failed))


{entry}
"""


def run_dies_once(corpus: Path, tmp_path: Path, thread: bool, guarded: bool) -> subprocess.CompletedProcess[str]:
    """DIES_ONCE (a worker dies on the first source task, once) into ``tmp_path/out``, its script run
    under a main guard or at import time, its driver with or without a thread of its own."""
    script, markers = tmp_path / "dies_once.py", tmp_path / "markers"
    script.write_text(DIES_ONCE.format(entry='if __name__ == "__main__":\n    main()' if guarded else "main()"))
    markers.mkdir()
    argv = [str(corpus), str(tmp_path / "out"), str(markers), first_source(corpus), "yes" if thread else "no"]
    return subprocess.run(
        [sys.executable, str(script), *argv], capture_output=True, text=True, timeout=180, env=clean_env()
    )


def test_after_a_crash_the_new_pool_forks_again_so_an_unguarded_script_is_not_run_twice(
    corpus: Path, tmp_path: Path
) -> None:
    """A replacement pool starts its workers as the first did: spawned ones would re-import this
    script (no main guard) and run the whole pipeline again in each worker."""
    proc = run_dies_once(corpus, tmp_path, thread=False, guarded=False)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "markers" / "death").exists() and "a worker process died; re-running" in proc.stderr
    assert proc.stderr.count("starting 2 worker processes by fork") == 1 and "spawned" not in proc.stderr
    records = list(iter_records(str(tmp_path / "out" / DEFAULT_RUN_DIR_NAME)))
    assert len(records) == 12 and {r["status"] for r in records} == {"done"}, "each task recorded once"


KILLED_MID_WRITE = """
import os, sys, time
from pathlib import Path
from curator_slurm import LocalExecutor, Pipeline, configure_logging
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage, ScoreFilter, WordCountFilter

inp, out, markers, victim = sys.argv[1:5]


def wait_for(name):
    deadline = time.monotonic() + 60
    while not Path(markers, name).exists() and time.monotonic() < deadline:
        time.sleep(0.01)


class DieOnceOtherIsWriting(ProcessingStage):
    def process(self, task):
        if task.source_id == victim and not Path(markers, "death").exists():
            wait_for("writing")
            Path(markers, "death").write_text(str(os.getpid()))
            os._exit(9)
        return task


class StallsOnceMidWrite(ParquetWriter):
    def process(self, task):
        written = super().process(task)  # into the source task's open output: a hidden temporary file
        if not Path(markers, "writing").exists():
            Path(markers, "writing").write_text(str(os.getpid()))
            time.sleep(120)  # until the pool, broken by the other worker's death, kills this one
        return written


if __name__ == "__main__":
    configure_logging()
    pipeline = Pipeline("local").add_stage(JsonlReader(inp)).add_stage(DieOnceOtherIsWriting())
    pipeline.add_stage(ScoreFilter(WordCountFilter(min_words=50))).add_stage(StallsOnceMidWrite(out))
    result = pipeline.run(LocalExecutor(workers=2))
    print(result.done, len(result.failed))
"""


def test_a_worker_killed_while_writing_leaves_no_temporary_file(
    corpus: Path, tmp_path: Path, reference: dict[str, bytes]
) -> None:
    """When one worker dies, the pool's other worker is killed too, possibly half-way through a file:
    its hidden temporary file is deleted, and the output is that of an undisturbed run."""
    script, markers, out = tmp_path / "killed_mid_write.py", tmp_path / "markers", tmp_path / "out"
    script.write_text(KILLED_MID_WRITE)
    markers.mkdir()
    proc = subprocess.run(
        [sys.executable, str(script), str(corpus), str(out), str(markers), first_source(corpus)],
        capture_output=True,
        text=True,
        timeout=180,
        env=clean_env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["12", "0"]
    writer_pid = int((markers / "writing").read_text())
    assert writer_pid != int((markers / "death").read_text())
    assert f"removed 1 temporary file(s) that killed workers left in {out}" in proc.stderr
    assert read_tree(out) == reference


def test_a_driver_with_numpy_loaded_is_told_how_to_keep_forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where numpy is installed pyarrow imports it, and its OpenBLAS starts threads, so workers spawn; the
    reason then names numpy and the setting that avoids it. numpy is not a dependency here: a stand-in
    module plays its part in sys.modules, and a Python thread plays OpenBLAS's."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with monkeypatch.context() as without:  # numpy is there under `make test-pyarrow-floor`
            without.delitem(sys.modules, "numpy", raising=False)
            method, why = choose_start_method()
        assert method == "spawn"
        assert "numpy" not in why
        monkeypatch.setitem(sys.modules, "numpy", types.ModuleType("numpy"))
        method, why = choose_start_method()
    finally:
        stop.set()
        thread.join()
    assert method == "spawn"
    assert "numpy is loaded" in why
    assert "OPENBLAS_NUM_THREADS=1" in why


@pytest.mark.parametrize("thread", [False, True], ids=["one-thread-forks", "threaded-spawns"])
def test_workers_fork_only_when_the_driver_has_no_other_thread_and_a_death_loses_nothing_either_way(
    corpus: Path, tmp_path: Path, reference: dict[str, bytes], thread: bool
) -> None:
    proc = run_dies_once(corpus, tmp_path, thread, guarded=True)
    out, markers = tmp_path / "out", tmp_path / "markers"
    assert proc.returncode == 0, proc.stderr
    first = re.search(r"starting 2 worker processes by (\w+) \((.*)\)", proc.stderr)
    assert first, proc.stderr
    if thread:  # (where numpy is loaded, the reason goes on to say how to avoid its threads)
        assert first.group(1) == "spawn"
        assert first.group(2).startswith("this process runs 2 threads; forking it could copy a lock one of them holds")
    else:
        assert first.groups() == ("fork", "this process runs no other thread")
    driver, done, failed = proc.stdout.split()
    died = int((markers / "death").read_text())
    assert died != int(driver), "a worker died, not the driver"
    assert (int(done), int(failed)) == (12, 0)
    assert "a worker process died; re-running" in proc.stderr
    assert read_tree(out) == reference

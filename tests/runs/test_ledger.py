"""The per-source-task ledger: crash safety, resume, failures, retries, stop signals, run directory checks."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError, ShardSpec
from curator_slurm.errors import RunDirError
from curator_slurm.runs.ledger import DEFAULT_RUN_DIR_NAME, iter_records, load_status
from curator_slurm.runs.options import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage, ScoreFilter, WordCountFilter
from curator_slurm.tasks import DocumentBatch, EmptyTask
from executors import ExecutorFactory
from helpers import REPO, clean_env, logged, read_tree, run_example

TALLY = REPO / "tests" / "pipelines" / "tally.py"


def tally_cmd(inp: Path, out: Path, tally: Path, *extra: str) -> list[str]:
    return [sys.executable, str(TALLY), "--input", str(inp), "--output", str(out), "--tally", str(tally), *extra]


def tallied(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def records(out: Path) -> list[dict]:
    return list(iter_records(str(out / DEFAULT_RUN_DIR_NAME)))


@pytest.fixture(scope="module")
def reference(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Outputs of one uninterrupted run of the tally pipeline."""
    out = tmp_path_factory.mktemp("reference")
    subprocess.run(tally_cmd(corpus, out, out.parent / "ref-tally"), check=True, env=clean_env(), capture_output=True)
    return read_tree(out)


def start_tally(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The tally pipeline as a background process whose stderr (its log) the test reads at the end."""
    return subprocess.Popen(cmd, env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_lines(path: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(tallied(path)) < n:
        assert time.monotonic() < deadline, f"{path} never reached {n} lines"
        time.sleep(0.05)


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_then_rerun(corpus: Path, tmp_path: Path, reference: dict[str, bytes], workers: int) -> None:
    """kill -9 midway: the re-run finishes the rest, outputs equal an uninterrupted run, no temporary
    files remain, and nothing done before the kill is processed again."""
    out, tally = tmp_path / "out", tmp_path / "tally"
    proc = subprocess.Popen(
        tally_cmd(corpus, out, tally, "--sleep", "0.3", "--workers", str(workers)),
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    run_dir = str(out / DEFAULT_RUN_DIR_NAME)
    deadline = time.monotonic() + 60
    while len(load_status(run_dir).done) < 2:  # kill once some work is recorded and more is under way
        assert time.monotonic() < deadline, "the run never recorded any work"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its workers, as a node failure would
    proc.wait()
    done_before = load_status(str(out / DEFAULT_RUN_DIR_NAME)).done
    assert 0 < len(done_before) < 12
    before = len(tallied(tally))

    rerun = subprocess.run(
        tally_cmd(corpus, out, tally, "--workers", str(workers)), env=clean_env(), capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr
    after = Counter(tallied(tally)[before:])
    assert not set(after) & done_before, "done source tasks were processed again"
    assert all(n == 1 for n in after.values()), f"processed twice after the restart: {after}"
    assert set(after) | done_before == {r["source"] for r in records(out) if r["status"] == "done"}
    assert read_tree(out) == reference  # also: no hidden temporary file left anywhere
    assert f"skipping {len(done_before)} source tasks already done" in rerun.stderr


def test_sigterm_stops_cleanly_and_resumes(corpus: Path, tmp_path: Path, reference: dict[str, bytes]) -> None:
    out, tally = tmp_path / "out", tmp_path / "tally"
    proc = start_tally(tally_cmd(corpus, out, tally, "--sleep", "0.4", "--workers", "2"))
    wait_for_lines(tally, 3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "received SIGTERM" in err and "stopped by SIGTERM" in err
    state = load_status(str(out / DEFAULT_RUN_DIR_NAME))
    started = set(tallied(tally))
    assert state.done == started, "every source task started before the signal finished and was recorded"
    assert len(state.done) < 12

    rerun = subprocess.run(tally_cmd(corpus, out, tally), env=clean_env(), capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert Counter(tallied(tally)).most_common(1)[0][1] == 1, "no source task ran twice"
    assert read_tree(out) == reference


def test_grace_period_abandons_stuck_work(corpus: Path, tmp_path: Path) -> None:
    out, tally = tmp_path / "out", tmp_path / "tally"
    proc = start_tally(tally_cmd(corpus, out, tally, "--sleep", "30"), {"CURATOR_GRACE_SECONDS": "1"})
    wait_for_lines(tally, 1)
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert "grace period of 1 s over" in err
    assert load_status(str(out / DEFAULT_RUN_DIR_NAME)).done == set()


def _break_corpus(src: Path, dst: Path) -> dict[str, str]:
    """Copy the corpus with one malformed line and one empty file; return {file name: expected error}."""
    shutil.copytree(src, dst)
    files = sorted(dst.iterdir())
    lines = files[2].read_text().splitlines()
    lines[6] = lines[6][: len(lines[6]) // 2]
    files[2].write_text("\n".join(lines) + "\n")
    files[5].write_bytes(b"")
    return {files[2].name: f"{files[2]}:7: malformed JSON", files[5].name: f"{files[5]}: file is empty"}


def test_bad_inputs_fail_exactly_their_tasks_and_rerun_fixes_them(corpus: Path, tmp_path: Path) -> None:
    inp, out, tally = tmp_path / "in", tmp_path / "out", tmp_path / "tally"
    expected = _break_corpus(corpus, inp)
    proc = subprocess.run(tally_cmd(inp, out, tally), env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 1
    assert "2 of 12 source tasks failed" in proc.stderr
    state = load_status(str(out / DEFAULT_RUN_DIR_NAME))
    assert len(state.done) == 10 and len(state.failed) == 2
    errors = {Path(r["files"][0]).name: r for r in state.failed.values()}
    assert set(errors) == set(expected)
    for name, message in expected.items():
        assert message in errors[name]["error"]
        assert errors[name]["stage"] == "jsonl_reader"
        assert errors[name]["attempts"] == 1, "data errors are not retried"
        assert "Traceback" in errors[name]["traceback"]
        assert errors[name]["host"] and errors[name]["shard"] == "0/1"
    assert len(list(out.glob("*.parquet"))) == 10

    shutil.rmtree(inp)
    shutil.copytree(corpus, inp)
    before = len(tallied(tally))
    rerun = subprocess.run(tally_cmd(inp, out, tally), env=clean_env(), capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert sorted(tallied(tally)[before:]) == sorted(state.failed), "only the failed tasks ran again"
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == 12


def test_truncated_parquet_is_recorded_failed(corpus: Path, tmp_path: Path) -> None:
    inp, out, tally = tmp_path / "in", tmp_path / "out", tmp_path / "tally"
    run_example(corpus, inp, "--min-words", "0")
    victim = sorted(inp.glob("*.parquet"))[3]
    victim.write_bytes(victim.read_bytes()[:100])
    proc = subprocess.run(tally_cmd(inp, out, tally, "--parquet"), env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 1
    failed = load_status(str(out / DEFAULT_RUN_DIR_NAME)).failed
    assert [r["files"] for r in failed.values()] == [[str(victim)]]
    assert f"{victim}: not a readable Parquet file" in next(iter(failed.values()))["error"]


class Flaky(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Fails the first ``failures`` attempts on each task, counted in files (works across processes)."""

    def __init__(self, marker_dir: str, failures: int, only: str | None = None) -> None:
        self.marker_dir, self.failures, self.only = marker_dir, failures, only

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if self.only is not None and task.source_id != self.only:
            return task
        marker = Path(self.marker_dir) / task.source_id
        attempts = int(marker.read_text()) + 1 if marker.exists() else 1
        marker.write_text(str(attempts))
        if attempts <= self.failures:
            raise RuntimeError(f"flaky failure {attempts} of {task.source_id}")
        return task


def _flaky_pipeline(corpus: Path, out: Path, markers: Path, failures: int, only: str | None = None) -> Pipeline:
    markers.mkdir(exist_ok=True)
    return (
        Pipeline("flaky")
        .add_stage(JsonlReader(str(corpus)))
        .add_stage(Flaky(str(markers), failures, only).with_(batch_size=4))
        .add_stage(ParquetWriter(out))
    )


def _first_source(corpus: Path) -> str:
    return JsonlReader(str(corpus)).decompose()[0].process(EmptyTask())[0].task_id


def test_retried_task_ends_done_with_attempts(corpus: Path, tmp_path: Path, executor_factory: ExecutorFactory) -> None:
    """A stage that fails twice then succeeds: done, attempts = 3."""
    out = tmp_path / "out"
    result = _flaky_pipeline(corpus, out, tmp_path / "m", failures=2).run(
        executor_factory(retry_backoff=0.001), shard=ShardSpec.single(), options=RunOptions()
    )
    assert result.done == 12 and not result.failed
    done = [r for r in records(out) if r["status"] == "done"]
    assert len(done) == 12 and {r["attempts"] for r in done} == {3}


def test_one_bad_task_in_a_batch_does_not_fail_its_neighbours(
    corpus: Path, tmp_path: Path, executor_factory: ExecutorFactory
) -> None:
    out = tmp_path / "out"
    bad = _first_source(corpus)
    with (
        logged(logging.WARNING) as warnings,
        pytest.raises(PipelineFailedError, match="1 of 12 source tasks failed") as info,
    ):
        _flaky_pipeline(corpus, out, tmp_path / "m", failures=99, only=bad).run(
            executor_factory(retry_backoff=0.001), shard=ShardSpec.single(), options=RunOptions()
        )
    attempts = [w for w in warnings if f"failed on task {bad}" in w]
    assert len(attempts) == 3 and attempts[-1].endswith("flaky failure 3 of " + bad + "')"), warnings
    result = info.value.result
    assert result.done == 11
    failed = load_status(str(out / DEFAULT_RUN_DIR_NAME)).failed
    assert list(failed) == [bad]
    assert failed[bad]["attempts"] == 3 and failed[bad]["stage"] == "flaky"
    assert "flaky failure 3" in failed[bad]["error"]


class SplitInFour(ProcessingStage[DocumentBatch, DocumentBatch]):
    def process(self, task: DocumentBatch) -> list[DocumentBatch]:
        n = task.data.num_rows
        parts = [task.data.slice(k * n // 4, (k + 1) * n // 4 - k * n // 4) for k in range(4)]
        return [task.derive(part, task_id=f"{task.task_id}-{k}") for k, part in enumerate(parts)]


class FailsOnBatches(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Fails whenever it is handed more than one task at once; one at a time it works."""

    def process_batch(self, tasks: list[DocumentBatch]) -> list[DocumentBatch]:
        if len(tasks) > 1:
            raise RuntimeError(f"cannot take {len(tasks)} at once")
        return tasks


def test_a_failed_batch_is_logged_before_its_tasks_are_retried_one_by_one(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pipeline = (
        Pipeline("batches")
        .add_stage(JsonlReader(str(corpus)))
        .add_stage(SplitInFour())
        .add_stage(FailsOnBatches().with_(batch_size=4))
        .add_stage(ParquetWriter(out))
    )
    with logged(logging.WARNING) as warnings:
        result = pipeline.run(LocalExecutor(workers=1, retry_backoff=0.001), shard=ShardSpec.single())
    assert result.done == 12 and not result.failed
    assert len(list(out.glob("*.parquet"))) == 48, "every part written once"
    batch = [w for w in warnings if "failed on a batch of 4 tasks" in w]
    assert len(batch) == 12 and batch[0].endswith(
        "RuntimeError('cannot take 4 at once'); retrying each task on its own"
    )
    assert not [w for w in warnings if "failed on task" in w], "one at a time, each task succeeded"


def test_rerun_with_another_shard_count_repeats_no_done_work(corpus: Path, tmp_path: Path) -> None:
    out, tally = tmp_path / "out", tmp_path / "tally"
    first = subprocess.run(
        tally_cmd(corpus, out, tally),
        env=clean_env({"CURATOR_NUM_SHARDS": "3", "CURATOR_SHARD_INDEX": "1"}),
        check=True,
    )
    assert first.returncode == 0
    done_first = set(tallied(tally))
    assert done_first
    for i in range(5):
        env = clean_env({"CURATOR_NUM_SHARDS": "5", "CURATOR_SHARD_INDEX": str(i)})
        subprocess.run(tally_cmd(corpus, out, tally), env=env, check=True, capture_output=True)
    counts = Counter(tallied(tally))
    assert len(counts) == 12 and set(counts.values()) == {1}


def test_run_dir_of_another_pipeline_is_refused(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"

    def pipeline(min_words: int) -> Pipeline:
        return (
            Pipeline("p")
            .add_stage(JsonlReader(str(corpus)))
            .add_stage(ScoreFilter(WordCountFilter(min_words=min_words)))
            .add_stage(ParquetWriter(out))
        )

    pipeline(50).run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions())
    with pytest.raises(RunDirError, match="belongs to another pipeline") as info:
        pipeline(60).run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions())
    message = str(info.value)
    assert "stage 2 'score_filter[word_count]': filter_obj was" in message
    assert "min_words=50" in message and "min_words=60" in message
    # Changing how it runs (batch size, retries) is not a different pipeline.
    again = pipeline(50)
    again.stages[1] = again.stages[1].with_(batch_size=3, max_retries=5)
    assert (
        again.run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions()).source_tasks_skipped == 12
    )


def test_changed_inputs_are_refused_unless_accepted(corpus: Path, tmp_path: Path) -> None:
    inp, out, tally = tmp_path / "in", tmp_path / "out", tmp_path / "tally"
    shutil.copytree(corpus, inp)
    env = clean_env({"CURATOR_NUM_SHARDS": "2", "CURATOR_SHARD_INDEX": "0"})
    subprocess.run(tally_cmd(inp, out, tally), env=env, check=True, capture_output=True)
    (inp / "zz-new.jsonl").write_text(json.dumps({"text": "new " * 60}) + "\n")
    env["CURATOR_SHARD_INDEX"] = "1"
    proc = subprocess.run(tally_cmd(inp, out, tally), env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "the inputs changed since this run started" in proc.stderr and "CURATOR_ACCEPT_NEW_INPUTS=1" in proc.stderr
    env["CURATOR_ACCEPT_NEW_INPUTS"] = "1"
    subprocess.run(tally_cmd(inp, out, tally), env=env, check=True, capture_output=True)


def test_torn_last_line_is_ignored(tmp_path: Path) -> None:
    ledger = tmp_path / "run" / "ledger"
    ledger.mkdir(parents=True)
    good = [{"source": f"s{i}", "status": "done", "outputs": [f"o{i}"]} for i in range(3)]
    failed = {"source": "s9", "status": "failed", "stage": "x", "error": "E: boom", "attempts": 3}
    body = "".join(json.dumps(r) + "\n" for r in [*good, failed])
    (ledger / "a.jsonl").write_text(body + '{"source": "s4", "status": "do')
    (ledger / "b.jsonl").write_text(json.dumps({"source": "s9", "status": "done"}) + "\n")
    state = load_status(str(tmp_path / "run"))
    assert state.done == {"s0", "s1", "s2", "s9"}, "done in any file wins over an earlier failure"
    assert state.failed == {}
    assert state.records == 5


def test_ledger_scales_to_many_records_in_few_files(tmp_path: Path) -> None:
    """100k records over 50 writer files load correctly (the benchmark times a million)."""
    ledger = tmp_path / "run" / "ledger"
    ledger.mkdir(parents=True)
    for w in range(50):
        lines = [
            json.dumps({"source": f"t{w}-{i}", "status": "done" if i % 10 else "failed", "error": "x"})
            for i in range(2000)
        ]
        (ledger / f"w{w}.jsonl").write_text("\n".join(lines) + "\n")
    state = load_status(str(tmp_path / "run"))
    assert len(state.done) == 90_000 and len(state.failed) == 10_000
    assert len(os.listdir(ledger)) == 50


def test_default_run_dir_is_inside_the_output_and_parquet_readers_ignore_it(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_example(corpus, out)
    assert (out / DEFAULT_RUN_DIR_NAME / "run.json").is_file()
    table = pq.read_table(out)  # a dataset reader skips the hidden run directory
    assert isinstance(table, pa.Table) and table.num_rows > 0


def test_balanced_shards_refuse_inputs_whose_sizes_changed(corpus: Path, tmp_path: Path) -> None:
    """The balanced strategy assigns by size: a file edited in place (same id) must not go unnoticed."""
    inp, out, tally = tmp_path / "in", tmp_path / "out", tmp_path / "tally"
    shutil.copytree(corpus, inp)
    env = {"CURATOR_NUM_SHARDS": "3", "CURATOR_SHARD_INDEX": "0", "CURATOR_SHARD_STRATEGY": "balanced"}
    subprocess.run(tally_cmd(inp, out, tally), env=clean_env(env), check=True, capture_output=True)
    victim = sorted(inp.iterdir())[3]
    victim.write_text(victim.read_text() + json.dumps({"text": "more " * 80}) + "\n")
    proc = subprocess.run(
        tally_cmd(inp, out, tally), env=clean_env({**env, "CURATOR_SHARD_INDEX": "1"}), capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "the inputs changed since this run started" in proc.stderr and "other file sizes" in proc.stderr


def test_files_of_one_group_with_clashing_types_fail_only_their_task(corpus: Path, tmp_path: Path) -> None:
    inp, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(corpus, inp)
    (inp / sorted(p.name for p in inp.iterdir())[0].replace(".jsonl", "b.jsonl")).write_text(
        json.dumps({"id": "n", "text": 12345}) + "\n"
    )
    pipeline = Pipeline("p").add_stage(JsonlReader(str(inp), files_per_partition=2)).add_stage(ParquetWriter(out))
    with pytest.raises(PipelineFailedError, match="1 of 7 source tasks failed") as info:
        pipeline.run(LocalExecutor(workers=1, retry_backoff=0), shard=ShardSpec.single(), options=RunOptions())
    (failure,) = info.value.result.failed
    assert "incompatible schemas" in failure.error and failure.attempts == 1
    assert len(list(out.glob("*.parquet"))) == 6

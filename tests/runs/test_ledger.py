"""The per-source-task ledger: crash safety, resume, failures recorded, run directory checks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.errors import RunDirError
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter, ScoreFilter, WordCountFilter
from support.helpers import clean_env, read_tree, records, run_example
from support.tallying import (
    reference_fixture,  # noqa: F401 - a fixture
    tallied,
    tally_cmd,
)


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

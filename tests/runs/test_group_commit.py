"""Group commit of the ledger: outputs are durable before their records, records are appended a window
at a time, a crash (kill -9 at random points) loses at most the window it was in, redone on resume."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.errors import SettingError
from curator_slurm.runs import durable as durable_module
from curator_slurm.runs.ledger import LedgerWriter, iter_records, load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME, RunDir
from curator_slurm.samples.corpus import make_corpus
from curator_slurm.settings import RunOptions
from curator_slurm.shard import ShardSpec
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.stages.io.writers import TMP_MARK, output_sync_deferred
from support.helpers import REPO, clean_env, read_tree

TALLY = REPO / "tests" / "pipelines" / "tally.py"


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


class SyncSpy:
    """Records every fsync and syncfs (the kernel calls that make data durable) with what the ledger
    file held at that moment."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, ledger_file: Path | None = None) -> None:
        self.events: list[tuple[str, str, int]] = []
        self.ledger_file = ledger_file
        real_fsync, real_syncfs = os.fsync, durable_module.syncfs

        def fsync(fd: int) -> None:
            self.events.append(("fsync", _fd_path(fd), self.committed()))
            real_fsync(fd)

        def syncfs(fd: int) -> None:
            self.events.append(("syncfs", _fd_path(fd), self.committed()))
            real_syncfs(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(durable_module, "syncfs", syncfs)

    def committed(self) -> int:
        """Lines of the ledger file on disk (0 before it exists)."""
        if self.ledger_file is None or not self.ledger_file.exists():
            return 0
        return self.ledger_file.read_bytes().count(b"\n")


def _outputs(directory: Path, n: int) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = directory / f"out-{i}.jsonl"
        path.write_text(f'{{"i": {i}}}\n')
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("method", ["fsync", "syncfs"])
def test_outputs_are_made_durable_before_the_records_that_list_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    if method == "syncfs" and not sys.platform.startswith("linux"):
        pytest.skip("syncfs is Linux-only")
    outputs = _outputs(tmp_path / "out", 7)
    writer = LedgerWriter(str(tmp_path / "run"), ShardSpec.single(), window=3, window_seconds=3600, sync=method)
    spy = SyncSpy(monkeypatch, Path(writer.path))
    for i, path in enumerate(outputs):
        writer.write({"source": f"s{i}", "status": "done", "outputs": [path], "seconds": 0.001})
    writer.close()
    monkeypatch.undo()

    lines = Path(writer.path).read_bytes().count(b"\n")
    assert lines == 7, "every record committed by the end"
    ledger_syncs = [e for e in spy.events if e[1] == writer.path]
    assert len(ledger_syncs) == 3, "one fsync of the ledger per window: 3 + 3 + the 1 that close() commits"
    if method == "fsync":
        for i, path in enumerate(outputs):
            (when,) = [committed for kind, p, committed in spy.events if p == path]
            assert when == (i // 3) * 3, f"{path} made durable before its window's records were appended"
        directory_syncs = [e for e in spy.events if e[1] == str(tmp_path / "out")]
        assert [e[2] for e in directory_syncs] == [0, 3, 6], "the directory too (the renames), once per window"
    else:
        assert [committed for kind, _, committed in spy.events if kind == "syncfs"] == [0, 3, 6]


def test_a_window_is_committed_when_full_old_or_long_enough_and_close_commits_the_rest(tmp_path: Path) -> None:
    now = [0.0]
    writer = LedgerWriter(
        str(tmp_path / "run"), ShardSpec.single(), window=4, window_seconds=1.0, sync="fsync", clock=lambda: now[0]
    )
    ledger = Path(writer.path)

    def lines() -> int:
        return ledger.read_bytes().count(b"\n") if ledger.exists() else 0

    for i in range(3):
        writer.write({"source": f"a{i}", "status": "done", "outputs": [], "seconds": 0.1})
    assert (lines(), writer.pending) == (0, 3), "nothing written before the window is due"
    writer.write({"source": "a3", "status": "done", "outputs": [], "seconds": 0.1})
    assert (lines(), writer.pending) == (4, 0), "full window (4 records) committed"

    writer.write({"source": "b0", "status": "done", "outputs": [], "seconds": 0.0})
    now[0] = 1.5
    writer.write({"source": "b1", "status": "failed", "error": "E: x", "seconds": 0.0})
    assert (lines(), writer.pending) == (6, 0), "window older than window_seconds committed"

    writer.write({"source": "c0", "status": "done", "outputs": [], "seconds": 1.2})
    assert (lines(), writer.pending) == (7, 0), "a task that ran longer than window_seconds is committed at once"

    writer.write({"source": "d0", "status": "done", "outputs": []})
    assert writer.pending == 1
    writer.close()
    assert lines() == 8 and load_status(str(tmp_path / "run")).done == {"a0", "a1", "a2", "a3", "b0", "c0", "d0"}


def test_window_1_commits_every_record(tmp_path: Path) -> None:
    writer = LedgerWriter(str(tmp_path / "run"), ShardSpec.single(), window=1)
    writer.write({"source": "s", "status": "done", "outputs": []})
    assert writer.pending == 0 and load_status(str(tmp_path / "run")).done == {"s"}
    writer.close()


def test_sink_writer_fsyncs_its_files_only_when_no_ledger_does(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a run directory each output is fsynced before its rename; with one, the writer skips that
    and the ledger makes the outputs durable (syncfs or fsync) before it appends their records."""

    def pipeline(out: Path) -> Pipeline:
        return Pipeline("durable").add_stage(JsonlReader(str(corpus))).add_stage(ParquetWriter(str(out)))

    spy = SyncSpy(monkeypatch)
    # An executor given no run directory (what a run whose source ids are not deterministic gets).
    LocalExecutor(workers=1).execute(pipeline(tmp_path / "plain").build(), ShardSpec.single(), run_dir=None)
    plain = [p for kind, p, _ in spy.events if TMP_MARK in p and p.startswith(str(tmp_path / "plain"))]
    assert len(plain) == 12, "no ledger: each of the 12 outputs fsynced (as its temporary file) before its rename"

    spy.events.clear()
    out = tmp_path / "logged"
    result = pipeline(out).run(LocalExecutor(workers=1), run_dir=str(tmp_path / "run"), options=RunOptions())
    written = [p for kind, p, _ in spy.events if TMP_MARK in p and p.startswith(str(out))]
    assert not written, "with a ledger the writer leaves the fsync to it"
    (ledger_file,) = (tmp_path / "run" / "ledger").iterdir()
    output_syncs = [i for i, (kind, p, _) in enumerate(spy.events) if kind == "syncfs" or p in result.output_files]
    assert output_syncs, "the ledger made the outputs durable"
    ledger_syncs = [i for i, (_, p, _) in enumerate(spy.events) if p == str(ledger_file)]
    # (Other files of the run directory, a progress file or a ledger summary, may be written around them.)
    assert len(ledger_syncs) == 1 and ledger_syncs[0] > max(output_syncs), "then appended the records, one fsync"
    assert not output_sync_deferred(), "closing the ledger gives the writers their fsync back"
    assert load_status(str(tmp_path / "run")).done and read_tree(out) == read_tree(tmp_path / "plain")


def test_window_settings_come_from_the_environment() -> None:
    options = RunOptions.from_env({"CURATOR_LEDGER_WINDOW": "8", "CURATOR_LEDGER_WINDOW_SECONDS": "0.25"})
    assert (options.ledger_window, options.ledger_window_seconds) == (8, 0.25)
    assert RunOptions.from_env({}).ledger_window == RunOptions().ledger_window
    with pytest.raises(SettingError, match="CURATOR_LEDGER_WINDOW='0' must be >= 1"):
        RunOptions.from_env({"CURATOR_LEDGER_WINDOW": "0"})
    with pytest.raises(SettingError, match="CURATOR_LEDGER_WINDOW_SECONDS='soon' is not a number"):
        RunOptions.from_env({"CURATOR_LEDGER_WINDOW_SECONDS": "soon"})


def test_run_dir_writer_takes_the_window_of_the_options(tmp_path: Path) -> None:
    writer = RunDir(tmp_path / "run").writer(ShardSpec.single(), RunOptions(ledger_window=7, ledger_window_seconds=2))
    assert (writer.window, writer.window_seconds) == (7, 2)
    writer.close()


# --- kill -9 at random points under group commit, then resume ---

WINDOW_ENV = {"CURATOR_LEDGER_WINDOW": "4", "CURATOR_LEDGER_WINDOW_SECONDS": "30"}


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 small JSONL files: 40 source tasks, so a kill falls between, and within, several windows."""
    root = tmp_path_factory.mktemp("many")
    make_corpus(str(root), files=40, docs_per_file=20, seed=5)
    return root


@pytest.fixture(scope="module")
def reference(many: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("reference")
    cmd = [sys.executable, str(TALLY), "--input", str(many), "--output", str(out), "--tally", str(out.parent / "t")]
    subprocess.run(cmd, env=clean_env(), check=True, capture_output=True)
    return read_tree(out)


def _tallied(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_kill_9_at_a_random_point_then_resume(
    many: Path, tmp_path: Path, reference: dict[str, bytes], seed: int, workers: int
) -> None:
    """The run is killed (driver and workers) once a random number of source tasks has started, at a
    random moment after. Every done record then names outputs that are in place, with their final bytes;
    the resume keeps every record, redoes exactly the source tasks not recorded done, and the outputs
    equal an uninterrupted run's."""
    rng = random.Random(seed * 10 + workers)
    out, tally = tmp_path / "out", tmp_path / "tally"
    cmd = [sys.executable, str(TALLY), "--input", str(many), "--output", str(out), "--tally", str(tally)]
    started_before_kill = rng.randint(1, 38)
    proc = subprocess.Popen(
        [*cmd, "--sleep", "0.02", "--workers", str(workers)],
        env=clean_env(WINDOW_ENV),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(_tallied(tally)) < started_before_kill and proc.poll() is None:
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.005)
    time.sleep(rng.uniform(0, 0.06))
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "killed while running"

    run_dir = str(out / DEFAULT_RUN_DIR_NAME)
    before = list(iter_records(run_dir))
    done_before = {r["source"] for r in before if r["status"] == "done"}
    for record in before:  # nothing recorded that is not on disk
        for path in record.get("outputs", []):
            rel = os.path.relpath(path, out)
            assert Path(path).read_bytes() == reference[rel], f"{rel} recorded done but not in place"
    assert len(before) % 4 == 0, "whole windows of 4 records only (a window is appended with one write)"
    started = len(_tallied(tally))

    resume = subprocess.run([*cmd, "--workers", str(workers)], env=clean_env(WINDOW_ENV), capture_output=True)
    assert resume.returncode == 0, resume.stderr.decode()
    after = list(iter_records(run_dir))
    assert all(r in after for r in before), "no record lost"
    redone = _tallied(tally)[started:]
    assert not set(redone) & done_before, "a source task recorded done was done again"
    assert len(redone) == len(set(redone)) == 40 - len(done_before), "each unrecorded source task done once more"
    assert {r["source"] for r in after if r["status"] == "done"} == done_before | set(redone)
    # A process killed while writing leaves its hidden temporary file (nothing can tell, on a shared
    # filesystem, that its writer is gone); the outputs themselves equal an uninterrupted run's.
    assert {k: v for k, v in read_tree(out).items() if TMP_MARK not in k} == reference


# --- the driver is not the bottleneck: small source tasks go to workers in chunks ---


def test_chunks_of_small_tasks_grow_with_their_speed_and_slow_tasks_go_one_at_a_time() -> None:
    from curator_slurm.backends.local import MAX_CHUNK, chunk_size

    assert chunk_size(None) == 1, "one at a time until a task's time is known"
    assert chunk_size(2.0) == 1 and chunk_size(0.05) == 1
    assert chunk_size(0.005) == 10
    assert chunk_size(1e-6) == MAX_CHUNK


def test_many_small_tasks_on_two_workers_are_each_recorded_once(tmp_path: Path) -> None:
    """300 tiny source tasks in chunks over 2 workers: every one recorded done once, in whole windows,
    and the outputs equal those of one worker."""
    inp = tmp_path / "in"
    make_corpus(str(inp), files=300, docs_per_file=3, seed=4)

    def run(workers: int, out: Path) -> None:
        pipeline = Pipeline("chunks").add_stage(JsonlReader(str(inp))).add_stage(ParquetWriter(str(out)))
        result = pipeline.run(LocalExecutor(workers=workers), options=RunOptions(ledger_window=64))
        assert result.done == 300

    run(1, tmp_path / "one")
    run(2, tmp_path / "two")
    records = list(iter_records(str(tmp_path / "two" / DEFAULT_RUN_DIR_NAME)))
    assert len(records) == len({r["source"] for r in records}) == 300
    assert read_tree(tmp_path / "two") == read_tree(tmp_path / "one")


def test_without_syncfs_each_output_and_directory_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel or C library without syncfs (ENOSYS): the commit falls back to an fsync of every output."""
    import errno

    def no_syncfs(fd: int) -> None:
        raise OSError(errno.ENOSYS, "syncfs: not implemented")

    outputs = _outputs(tmp_path / "out", 3)
    writer = LedgerWriter(str(tmp_path / "run"), ShardSpec.single(), window=3, sync="syncfs")
    spy = SyncSpy(monkeypatch, Path(writer.path))
    monkeypatch.setattr(durable_module, "syncfs", no_syncfs)
    for i, path in enumerate(outputs):
        writer.write({"source": f"s{i}", "status": "done", "outputs": [path]})
    writer.close()
    synced = [p for kind, p, committed in spy.events if committed == 0]
    assert set(outputs) | {str(tmp_path / "out")} <= set(synced)
    assert load_status(str(tmp_path / "run")).done == {"s0", "s1", "s2"}

"""An output rewritten at its recorded size is caught: the phase that reads it refuses before any work, and
`status --verify` fails, for an exact-dedup shuffle file and a tokenize part rewritten in place; ledgers
written before modification times were compared still read and still verify."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor
from curator_slurm.runs.upstream import PhaseInputsError
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from support.dupcorpus import make_dup_corpus
from support.helpers import clean_env


def status(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "curator_slurm.cli", "status", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=600)


def rewrite_same_size(path: Path, content: bytes) -> None:
    """Write ``content`` into ``path`` in place (no rename), padded or cut to the file's size."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.write(content[:size].ljust(size, b"\0"))
    stamp = path.stat().st_mtime_ns
    assert path.stat().st_size == size and stamp  # the size stays what the ledger recorded


def exact(data: Path, out: Path) -> ExactDuplicates:
    return ExactDuplicates(JsonlReader(data), ParquetWriter(out), id_field="id", buckets=5)


def test_a_shuffle_file_rewritten_at_its_size_is_refused_and_fails_verify(tmp_path: Path) -> None:
    data = tmp_path / "in"
    make_dup_corpus(data, files=4, docs=25)
    out = tmp_path / "out"
    exact(data, out).run(LocalExecutor(workers=1), options=RunOptions(phase="hash"))
    victim = sorted((out / ".curator-work" / "shuffle" / "hash").glob("*.parquet"))[0]
    before = victim.stat()
    # Another valid Parquet file of the same size: the same table with its hash column replaced would be the
    # attack; any same-size rewrite must be caught, so the bytes reversed in place are enough to test it.
    rewrite_same_size(victim, victim.read_bytes()[::-1])
    os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))  # as a later write leaves it

    with pytest.raises(PhaseInputsError, match="rewritten since it was recorded"):
        exact(data, out).run(LocalExecutor(workers=1), options=RunOptions(phase="find"))
    root = out / ".curator-work" / ".curator-run"
    assert not (root / "find" / "ledger").exists(), "the refused phase did no work"
    verify = status(str(root), "--verify")
    assert verify.returncode == 1, verify.stdout
    assert f"{victim}: rewritten since it was recorded" in verify.stdout


def test_a_tokenize_part_reversed_in_place_is_refused_by_the_merge(tmp_path: Path, corpus: Path) -> None:
    from curator_slurm.stages.io.megatron import MegatronTokenizerWriter
    from curator_slurm.workflows.tokenization import MegatronTokenization
    from support.megatron_files import corpus_texts, train_tokenizer

    tokenizer = tmp_path / "tokenizer.json"
    train_tokenizer(tokenizer, list(corpus_texts(corpus))[:200], vocab_size=400)

    def workflow() -> MegatronTokenization:
        writer = MegatronTokenizerWriter(tmp_path / "pairs", str(tokenizer), append_eod=False)
        return MegatronTokenization(JsonlReader(corpus), writer, tmp_path / "tokens")

    workflow().run(LocalExecutor(workers=1), options=RunOptions(phase="tokenize"))
    part = sorted((tmp_path / "pairs").rglob("*.bin"))[0]
    stamp = part.stat()
    rewrite_same_size(part, part.read_bytes()[::-1])
    os.utime(part, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000))
    with pytest.raises(PhaseInputsError, match=f"{part}: rewritten since it was recorded"):
        workflow().run(LocalExecutor(workers=1), options=RunOptions(phase="merge"))
    root = next(p.parent for p in tmp_path.rglob("tokenize") if (p / "ledger").is_dir())
    verify = status(str(root), "--verify")
    assert verify.returncode == 1 and f"{part}: rewritten" in verify.stdout, verify.stdout


def test_a_ledger_without_modification_times_still_reads_and_verifies(tmp_path: Path) -> None:
    """A done record of the previous version (``written`` without ``mtimes``) is compared by size alone."""
    out = tmp_path / "out"
    out.mkdir()
    table = pa.table({"id": [1, 2, 3]})
    pq.write_table(table, out / "a.parquet")
    run = tmp_path / "run"
    (run / "ledger").mkdir(parents=True)
    path = str(out / "a.parquet")
    record = {"source": "t1", "status": "done", "time": 1.0, "outputs": [path],
              "written": {"paths": [path], "sizes": [os.path.getsize(path)]}}  # fmt: skip
    (run / "ledger" / "old.jsonl").write_text(json.dumps(record) + "\n")
    (run / "sources.json").write_text(json.dumps({"count": 1, "digest": "x"}))
    ok = status(str(run), "--verify")
    assert ok.returncode == 0 and "1 done" in ok.stdout.replace("1/1", "1 done"), ok.stdout + ok.stderr
    os.utime(path, ns=(0, 10**18))  # touched: no mtime recorded, so not a change
    assert status(str(run), "--verify").returncode == 0
    (out / "a.parquet").write_bytes(b"x")
    lost = status(str(run), "--verify")
    assert lost.returncode == 1 and "was" in lost.stdout, lost.stdout

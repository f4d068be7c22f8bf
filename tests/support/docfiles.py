"""Documents on disk for the reader, partitioning and writer tests: sample rows, JSONL files written and
read back, and what a run left in its output directory."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from curator_slurm import EmptyTask, FileGroupTask, LocalExecutor, Pipeline, PipelineResult, ShardSpec
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.stages import FilePartitioningStage
from curator_slurm.stages.io.jsonl import read_jsonl
from curator_slurm.stages.io.writers import TMP_MARK

#: Documents with unicode, escapes, nested structs, lists (empty, null, of structs), explicit nulls and
#: mixed numeric values; every row has every key so a columnar format can represent them exactly.
ROWS: list[dict[str, Any]] = [
    {
        "id": 1,
        "text": "héllo wörld 日本語 🙂 — “quotes”",
        "tags": ["a", "b"],
        "meta": {"lang": "de", "score": 0.5, "ok": True},
        "spans": [{"start": 0, "end": 5}],
        "note": None,
    },
    {
        "id": 2,
        "text": 'line1\nline2\t"quoted" \\ back\\slash',
        "tags": [],
        "meta": {"lang": None, "score": 1.25, "ok": False},
        "spans": [],
        "note": "x",
    },
    {"id": 3, "text": "", "tags": None, "meta": None, "spans": None, "note": None},
    {
        "id": 4,
        "text": "emoji 👩‍👩‍👧 and RTL مرحبا and combining e\u0301",
        "tags": ["ü", ""],
        "meta": {"lang": "ar", "score": -3.0, "ok": None},
        "spans": [{"start": 1, "end": 2}, {"start": None, "end": 9}],
        "note": "",
    },
    {
        "id": 5,
        "text": "   leading and trailing   ",
        "tags": ["x"],
        "meta": {"lang": "en", "score": 1e-9, "ok": True},
        "spans": None,
        "note": "\u2028separator",
    },
]


def run(pipeline: Pipeline) -> PipelineResult:
    """Run in this process, unsharded, without retry sleeps."""
    return pipeline.run(LocalExecutor(workers=1, retry_backoff=0), shard=ShardSpec.single())


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file, split on newlines only (U+2028 inside a string is not a line break)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]


def as_multiset(rows: list[dict[str, Any]]) -> Counter[str]:
    """Rows as a multiset of canonical JSON: equal when the same dicts occur, in any order."""
    return Counter(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows)


def output_files(directory: Path) -> list[Path]:
    """The files a run wrote into ``directory`` (its run directory, the ledger, left out)."""
    return sorted(p for p in directory.iterdir() if p.name != DEFAULT_RUN_DIR_NAME)


def output_rows(directory: Path) -> list[dict[str, Any]]:
    """Every row of every output file in ``directory``."""
    rows: list[dict[str, Any]] = []
    for p in output_files(directory):
        if p.suffix == ".parquet":
            rows.extend(pq.read_table(p).to_pylist())
        elif p.suffix == ".jsonl":
            rows.extend(read_jsonl_rows(p))
        elif p.name.endswith((".jsonl.gz", ".jsonl.zst")):
            rows.extend(read_jsonl(str(p)).to_pylist())
    return rows


def partitions(paths: Any, **kwargs: Any) -> list[FileGroupTask]:
    return FilePartitioningStage(paths, **kwargs).process(EmptyTask())


def write_sized(path: Path, size: int) -> Path:
    """A JSONL file of exactly ``size`` bytes."""
    prefix, suffix = '{"text": "', '"}\n'
    path.write_text(prefix + "x" * (size - len(prefix) - len(suffix)) + suffix, encoding="ascii")
    assert path.stat().st_size == size
    return path


def leftovers(directory: Path) -> list[str]:
    """Hidden entries other than the run directory, and temporary files anywhere (run directory included)."""
    hidden = [p.name for p in directory.iterdir() if p.name.startswith(".") and p.name != DEFAULT_RUN_DIR_NAME]
    return hidden + [str(p) for p in directory.rglob("*") if TMP_MARK in p.name or ".tmp-" in p.name]


def names(groups: list[FileGroupTask]) -> list[list[str]]:
    return [[os.path.basename(p) for p in g.data] for g in groups]


def with_source(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """``rows`` as a reader gives them from the file ``name`` (relative to the input root): with ``file_path``."""
    return [{**r, "file_path": name} for r in rows]


#: ROWS as read from the ``jsonl_input`` fixture's files: each naming its file.
ROWS_READ = with_source(ROWS[:2], "a.jsonl") + with_source(ROWS[2:4], "b.jsonl") + with_source(ROWS[4:], "c.jsonl")


@pytest.fixture(name="jsonl_input")
def jsonl_input_fixture(tmp_path: Path) -> Path:
    """ROWS spread over three JSONL files."""
    d = tmp_path / "in"
    write_jsonl(d / "a.jsonl", ROWS[:2])
    write_jsonl(d / "b.jsonl", ROWS[2:4])
    write_jsonl(d / "c.jsonl", ROWS[4:])
    return d

"""Null, missing and empty texts in deduplication: one text by default (the first kept, as NeMo Curator's hash
treats them), every one kept with ``empty_text="keep"``; real duplicates are removed either way."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates

TEXT = "the quick brown fox jumps over the lazy dog and runs far away into the dark green forest"
RECORDS = [
    {"id": "a", "text": TEXT},
    {"id": "empty", "text": ""},
    {"id": "null", "text": None},
    {"id": "missing"},
    {"id": "a-copy", "text": TEXT},
    {"id": "other", "text": "a different text of its own with nothing in common at all here"},
    {"id": "empty-2", "text": ""},
]
EMPTY = {"empty", "null", "missing", "empty-2"}
SPACES = {"id": "spaces", "text": "  \n\t "}


def corpus(root: Path) -> Path:
    root.mkdir()
    # Whitespace-only is empty after exact dedup's normalisation; fuzzy's word shingles have none for it either.
    records = [*RECORDS[:3], SPACES, *RECORDS[3:]]
    (root / "part.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


def kept(out: Path) -> set[str]:
    return {i for p in out.glob("*.parquet") for i in pq.read_table(p).column("id").to_pylist()}


@pytest.mark.parametrize("fuzzy", [False, True], ids=["exact", "fuzzy"])
@pytest.mark.parametrize("empty_text", ["dedup", "keep"])
def test_empty_texts(tmp_path: Path, fuzzy: bool, empty_text: str) -> None:
    data = corpus(tmp_path / "in")
    out = tmp_path / "out"
    kind = FuzzyDuplicates if fuzzy else ExactDuplicates
    kind(reader=JsonlReader(str(data)), writer=ParquetWriter(str(out)), buckets=4, empty_text=empty_text).run(
        LocalExecutor(workers=1)
    )
    everything = {r["id"] for r in RECORDS} | {"spaces"}
    if empty_text == "keep":
        assert kept(out) == everything - {"a-copy"}
    else:  # the first empty one survives, in (path, row) order: "empty"
        assert kept(out) == everything - {"a-copy"} - (EMPTY | {"spaces"}) | {"empty"}


def test_a_bad_choice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty_text='drop' must be one of"):
        ExactDuplicates(reader=JsonlReader(str(tmp_path)), writer=ParquetWriter(str(tmp_path / "o")), empty_text="drop")

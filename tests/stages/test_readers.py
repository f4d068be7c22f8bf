"""Readers, partitioning and writers on real files: round trips, grouping, deterministic ids and names,
clear errors for bad input, atomic and non-destructive writes."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_slurm import (
    CuratorError,
    DocumentBatch,
    EmptyTask,
    FailedTask,
    FileGroupTask,
    InputError,
    LocalExecutor,
    Pipeline,
    PipelineFailedError,
    PipelineResult,
    ShardSpec,
)
from curator_slurm.runs.ledger import DEFAULT_RUN_DIR_NAME
from curator_slurm.stages import (
    FilePartitioningStage,
    JsonlReader,
    JsonlWriter,
    ParquetReader,
    ParquetWriter,
    ScoreFilter,
    WordCountFilter,
)
from curator_slurm.stages.readers import row_group_start
from curator_slurm.stages.writers import TMP_MARK, atomic_write
from curator_slurm.tasks import content_id
from helpers import clean_env, logged, read_tree, run_example

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


# --- round trips ----------------------------------------------------------------------------------


@pytest.fixture
def jsonl_input(tmp_path: Path) -> Path:
    """ROWS spread over three JSONL files."""
    d = tmp_path / "in"
    write_jsonl(d / "a.jsonl", ROWS[:2])
    write_jsonl(d / "b.jsonl", ROWS[2:4])
    write_jsonl(d / "c.jsonl", ROWS[4:])
    return d


def test_jsonl_to_parquet_to_jsonl_preserves_every_row_and_field(jsonl_input: Path, tmp_path: Path) -> None:
    """JSONL → Parquet → JSONL keeps every row and every value: unicode, escapes, nested structs,
    lists, empty strings and nulls, with the JSON types of the input."""
    parquet_out, jsonl_out = tmp_path / "pq", tmp_path / "js"
    first = run(Pipeline("to-parquet").add_stage(JsonlReader(jsonl_input)).add_stage(ParquetWriter(parquet_out)))
    assert len(first.output_files) == 3
    assert as_multiset(output_rows(parquet_out)) == as_multiset(ROWS)

    second = run(Pipeline("to-jsonl").add_stage(ParquetReader(parquet_out)).add_stage(JsonlWriter(jsonl_out)))
    assert len(second.output_files) == 3
    back = output_rows(jsonl_out)
    assert as_multiset(back) == as_multiset(ROWS)
    assert {type(r["id"]) for r in back} == {int}
    assert {type(r["meta"]["score"]) for r in back if r["meta"]} == {float}


def test_jsonl_to_jsonl_keeps_rows_and_writes_utf8(jsonl_input: Path, tmp_path: Path) -> None:
    """JsonlWriter writes UTF-8 text (not \\u escapes) with one object per line and keeps every row."""
    out = tmp_path / "out"
    run(Pipeline("p").add_stage(JsonlReader(jsonl_input, files_per_partition=3)).add_stage(JsonlWriter(out)))
    (only,) = output_files(out)
    raw = only.read_text(encoding="utf-8")
    assert "日本語 🙂" in raw
    assert raw.endswith("\n") and raw.count("\n") == len(ROWS)
    assert as_multiset(read_jsonl_rows(only)) == as_multiset(ROWS)


def test_strings_that_look_like_dates_stay_strings(tmp_path: Path) -> None:
    """A string value that happens to look like a date is data, not a timestamp: it round-trips as
    the same string through JSONL and keeps a string type in Parquet."""
    rows = [{"id": 1, "date": "2020-01-01", "when": "2021-05-05T10:00:00"}, {"id": 2, "date": "1999-12-31", "when": ""}]
    write_jsonl(tmp_path / "in" / "d.jsonl", rows)
    run(Pipeline("p").add_stage(JsonlReader(tmp_path / "in")).add_stage(ParquetWriter(tmp_path / "pq")))
    (parquet,) = output_files(tmp_path / "pq")
    assert pq.read_schema(parquet).field("date").type == pa.string()
    run(Pipeline("p").add_stage(JsonlReader(tmp_path / "in")).add_stage(JsonlWriter(tmp_path / "js")))
    assert as_multiset(output_rows(tmp_path / "js")) == as_multiset(rows)


def test_reader_fields_select_and_order_columns(jsonl_input: Path, tmp_path: Path) -> None:
    """fields=[...] on either reader keeps exactly those columns, in that order, for every row."""
    run(Pipeline("p").add_stage(JsonlReader(jsonl_input, fields=["text", "id"])).add_stage(JsonlWriter(tmp_path / "j")))
    rows = output_rows(tmp_path / "j")
    assert [list(r) for r in rows] == [["text", "id"]] * len(ROWS)
    assert as_multiset(rows) == as_multiset([{"text": r["text"], "id": r["id"]} for r in ROWS])

    run(Pipeline("p").add_stage(JsonlReader(jsonl_input)).add_stage(ParquetWriter(tmp_path / "pq")))
    run(Pipeline("p").add_stage(ParquetReader(tmp_path / "pq", fields=["meta"])).add_stage(JsonlWriter(tmp_path / "m")))
    assert as_multiset(output_rows(tmp_path / "m")) == as_multiset([{"meta": r["meta"]} for r in ROWS])


def test_writer_fields_select_columns(jsonl_input: Path, tmp_path: Path) -> None:
    """fields=[...] on a writer writes only those columns."""
    run(Pipeline("p").add_stage(JsonlReader(jsonl_input)).add_stage(ParquetWriter(tmp_path / "o", fields=["id"])))
    assert sorted(r["id"] for r in output_rows(tmp_path / "o")) == [1, 2, 3, 4, 5]
    assert {tuple(r) for r in output_rows(tmp_path / "o")} == {("id",)}


def test_jsonl_reader_missing_field_names_field_and_available_ones(jsonl_input: Path, tmp_path: Path) -> None:
    """Asking a JSONL reader for a field the file lacks fails that partition, naming the file, the
    missing field and the fields the file does have; it is not retried."""
    pipeline = Pipeline("p").add_stage(JsonlReader(jsonl_input / "a.jsonl", fields=["nope"]))
    with pytest.raises(PipelineFailedError) as info:
        run(pipeline.add_stage(JsonlWriter(tmp_path / "out")))
    (failed,) = info.value.result.failed
    assert "a.jsonl: missing field(s) ['nope']" in failed.error
    assert "'text'" in failed.error
    assert failed.attempts == 1


def test_parquet_reader_missing_field_names_field_not_corruption(tmp_path: Path) -> None:
    """Asking a Parquet reader for a missing field says the field is missing, not that the file is broken."""
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"id": [1], "text": ["a"]}), tmp_path / "in" / "x.parquet")
    pipeline = Pipeline("p").add_stage(ParquetReader(tmp_path / "in", fields=["nope"]))
    with pytest.raises(PipelineFailedError) as info:
        run(pipeline.add_stage(JsonlWriter(tmp_path / "out")))
    (failed,) = info.value.result.failed
    assert "x.parquet" in failed.error
    assert "nope" in failed.error
    assert "truncated" not in failed.error


# --- partitioning ---------------------------------------------------------------------------------


@pytest.fixture
def five_files(tmp_path: Path) -> list[Path]:
    """Five JSONL files of 510 bytes each: two fit in 1 KiB (1020 B) but not in 1 kB (1000 B)."""
    d = tmp_path / "sized"
    d.mkdir()
    return [write_sized(d / f"f{i}.jsonl", 510) for i in range(5)]


def names(groups: list[FileGroupTask]) -> list[list[str]]:
    return [[os.path.basename(p) for p in g.data] for g in groups]


def test_each_file_is_its_own_partition_by_default(five_files: list[Path]) -> None:
    """Without files_per_partition or blocksize, every file is one partition, in sorted order."""
    assert names(partitions(five_files[0].parent)) == [[f"f{i}.jsonl"] for i in range(5)]


def test_files_per_partition_groups_sorted_files(five_files: list[Path]) -> None:
    """files_per_partition=2 makes groups of two sorted files, the last one shorter."""
    groups = partitions(five_files[0].parent, files_per_partition=2)
    assert names(groups) == [["f0.jsonl", "f1.jsonl"], ["f2.jsonl", "f3.jsonl"], ["f4.jsonl"]]
    assert [g.metadata["bytes"] for g in groups] == [1020, 1020, 510]
    assert all(os.path.isabs(p) for g in groups for p in g.data)


@pytest.mark.parametrize("blocksize", ["1KiB", "1 kib", 1024, "1.0KiB"])
def test_blocksize_in_kibibytes_packs_two_files(five_files: list[Path], blocksize: int | str) -> None:
    """blocksize 1 KiB (as a string with a binary unit or as an int) packs files greedily up to 1024 bytes."""
    groups = partitions(five_files[0].parent, blocksize=blocksize)
    assert names(groups) == [["f0.jsonl", "f1.jsonl"], ["f2.jsonl", "f3.jsonl"], ["f4.jsonl"]]


@pytest.mark.parametrize("blocksize", ["1KB", "1kb", 1000])
def test_blocksize_in_kilobytes_is_decimal(five_files: list[Path], blocksize: int | str) -> None:
    """'1KB' means 1000 bytes: two 510-byte files exceed it, so each file is alone."""
    assert names(partitions(five_files[0].parent, blocksize=blocksize)) == [[f"f{i}.jsonl"] for i in range(5)]


def test_file_bigger_than_blocksize_gets_its_own_partition(tmp_path: Path) -> None:
    """A file larger than the blocksize is never split or dropped: it is a partition by itself."""
    write_sized(tmp_path / "a.jsonl", 100)
    write_sized(tmp_path / "b.jsonl", 5000)
    write_sized(tmp_path / "c.jsonl", 100)
    write_sized(tmp_path / "d.jsonl", 100)
    assert names(partitions(tmp_path, blocksize="1KiB")) == [["a.jsonl"], ["b.jsonl"], ["c.jsonl", "d.jsonl"]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"blocksize": "1 parsec"}, r"blocksize='1 parsec' is not a size"),
        ({"blocksize": 0}, r"blocksize=0 must be positive"),
        ({"files_per_partition": 0}, r"files_per_partition=0 must be >= 1"),
        ({"files_per_partition": 2, "blocksize": "1MiB"}, r"not both"),
        ({"limit": 0}, r"limit=0 must be >= 1"),
    ],
)
def test_bad_partitioning_settings_are_refused(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    """Nonsense partitioning settings fail when the reader is made, with the offending value."""
    with pytest.raises(ValueError, match=message):
        JsonlReader(tmp_path, **kwargs)


# --- split files ----------------------------------------------------------------------------------


def read_pieces(path: Path, blocksize: int, reader_class: type[Any] = JsonlReader) -> list[dict[str, Any]]:
    """Rows of ``path`` read piece by piece (split_files), pieces in file order."""
    partitioner, reader = reader_class(path, blocksize=blocksize, split_files=True).decompose()
    rows: list[dict[str, Any]] = []
    for task in partitioner.process(EmptyTask()):
        batch = reader.process(task)
        if batch is not None:
            rows.extend(batch.data.to_pylist())
    return rows


line_texts = st.lists(st.one_of(st.just(""), st.text(alphabet='ab é\u2028\\"{}', max_size=120)), max_size=25)


@settings(max_examples=150, deadline=None)
@given(texts=line_texts, blank_at=st.lists(st.integers(0, 25), max_size=4), trailing=st.booleans(), cut=st.data())
def test_pieces_of_a_split_file_read_every_line_exactly_once(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], blank_at: list[int], trailing: bool, cut: st.DataObject
) -> None:
    """Wherever the cuts fall (inside a line, on a newline, inside a multi-byte character, several cuts in
    one long line), the pieces together hold each record once, in file order."""
    lines = [json.dumps({"i": i, "text": t}, ensure_ascii=False) for i, t in enumerate(texts)]
    for position in sorted(blank_at, reverse=True):
        lines.insert(min(position, len(lines)), "")
    content = "\n".join(lines) + ("\n" if trailing else "")
    if not content.strip():
        return
    path = tmp_path_factory.mktemp("split") / "f.jsonl"
    path.write_bytes(content.encode("utf-8"))
    blocksize = cut.draw(st.integers(1, len(content.encode("utf-8")) + 1), label="blocksize")
    assert read_pieces(path, blocksize) == [{"i": i, "text": t} for i, t in enumerate(texts)]


def test_split_files_cuts_large_files_into_pieces_that_are_source_tasks(tmp_path: Path) -> None:
    """Files over blocksize become pieces of at most blocksize bytes, each with its own stable id and
    size; smaller files are grouped as before; a compressed file cannot be split and stays whole."""
    write_sized(tmp_path / "a.jsonl", 100)
    write_jsonl(tmp_path / "b.jsonl", [{"text": "y" * 40, "n": i} for i in range(100)])  # 5,000+ bytes
    write_sized(tmp_path / "c.jsonl", 100)
    write_sized(tmp_path / "d.jsonl", 100)
    (tmp_path / "e.jsonl.gz").write_bytes(gzip.compress(b"".join(b'{"text": "%d"}\n' % i for i in range(2000))))
    big = (tmp_path / "b.jsonl").stat().st_size
    gz = (tmp_path / "e.jsonl.gz").stat().st_size
    assert gz > 1024
    with logged(logging.WARNING) as messages:
        groups = partitions(tmp_path, blocksize="1KiB", split_files=True)
    pieces = [g for g in groups if "byte_range" in g.metadata]
    assert names(groups)[0] == ["a.jsonl"] and names(groups)[-2:] == [["c.jsonl", "d.jsonl"], ["e.jsonl.gz"]]
    assert names(pieces) == [["b.jsonl"]] * len(pieces) and len(pieces) == -(-big // 1024)
    ranges = [tuple(g.metadata["byte_range"]) for g in pieces]
    assert ranges[0][0] == 0 and ranges[-1][1] == big
    assert all(end == nxt for (_, end), (nxt, _) in pairwise(ranges)), "they tile the file"
    assert all(0 < g.metadata["bytes"] <= 1024 for g in pieces)
    ids = [g.task_id for g in groups]
    assert len(set(ids)) == len(ids) and ids == [
        g.task_id for g in partitions(tmp_path, blocksize=1024, split_files=True)
    ]
    assert content_id("b.jsonl") not in ids, "a piece never takes the whole file's id"
    assert len(messages) == 1 and "1 compressed file(s)" in messages[0]
    assert [g.metadata.get("byte_range") for g in partitions(tmp_path, blocksize="1KiB")] == [None] * 4


def test_a_split_file_written_by_shards_holds_each_record_once(tmp_path: Path) -> None:
    """The pieces spread over shards like any source task; the shards' outputs together are the file."""
    src, out = tmp_path / "in", tmp_path / "out"
    rows = [{"n": i, "text": "word " * (i % 37)} for i in range(3000)]
    write_jsonl(src / "big.jsonl", rows)
    per_shard = []
    for index in range(3):
        reader = JsonlReader(src, blocksize="8KiB", split_files=True)
        result = (
            Pipeline("p")
            .add_stage(reader)
            .add_stage(ParquetWriter(out))
            .run(LocalExecutor(workers=1), shard=ShardSpec.explicit(index, 3))
        )
        per_shard.append(result.source_tasks_mine)
    assert sum(per_shard) == len(output_files(out)) > 3 and all(per_shard)
    assert sorted(r["n"] for r in output_rows(out)) == list(range(3000))


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(0, 400), group=st.integers(1, 120), dictionary=st.booleans(), cut=st.data())
def test_pieces_of_a_split_parquet_file_read_every_row_group_exactly_once(
    tmp_path_factory: pytest.TempPathFactory, rows: int, group: int, dictionary: bool, cut: st.DataObject
) -> None:
    """A piece reads the row groups whose first byte (a dictionary page, when there is one) lies in
    it: wherever the cuts fall, the pieces hold every row once, in file order."""
    path = tmp_path_factory.mktemp("split") / "f.parquet"
    table = pa.table({"n": list(range(rows)), "text": [f"doc {i % 7} " * (i % 5) for i in range(rows)]})
    pq.write_table(table, path, row_group_size=group, use_dictionary=dictionary)
    size = path.stat().st_size
    blocksize = cut.draw(st.integers(64, size + 1), label="blocksize")
    assert read_pieces(path, blocksize, ParquetReader) == table.to_pylist()
    # Cuts placed on a row group's first byte, or one byte either side of it.
    with pq.ParquetFile(path) as f:
        starts = [row_group_start(f.metadata.row_group(i)) for i in range(f.metadata.num_row_groups)]
    near = sorted({s + d for s in starts for d in (-1, 0, 1) if 0 < s + d < size})
    cuts = cut.draw(st.lists(st.sampled_from(near), unique=True), label="cuts") if near else []
    (_, reader) = ParquetReader(path, blocksize=blocksize, split_files=True).decompose()
    pieces = [reader.read_range(str(path), a, b) for a, b in pairwise([0, *sorted(cuts), size])]
    assert [row for p in pieces if p is not None for row in p.to_pylist()] == table.to_pylist()


def test_a_row_group_starts_at_its_dictionary_page_when_it_has_one(tmp_path: Path) -> None:
    """The row group belongs to the piece holding its first byte: with dictionary encoding that is the
    dictionary page, which comes before the data pages."""
    path = tmp_path / "d.parquet"
    table = pa.table({"n": list(range(300)), "lang": [["en", "de", "fr"][i % 3] for i in range(300)]})
    pq.write_table(table, path, row_group_size=100, use_dictionary=True)
    (_, reader) = ParquetReader(path, blocksize=1024, split_files=True).decompose()
    with pq.ParquetFile(path) as f:
        groups = [f.metadata.row_group(i) for i in range(f.metadata.num_row_groups)]
    for i, group in enumerate(groups):
        first = group.column(0)
        assert first.has_dictionary_page and 0 < first.dictionary_page_offset < first.data_page_offset
        assert row_group_start(group) == first.dictionary_page_offset
        alone = reader.read_range(str(path), first.dictionary_page_offset, first.dictionary_page_offset + 1)
        assert alone is not None and alone.to_pylist() == table.slice(100 * i, 100).to_pylist()
        assert reader.read_range(str(path), first.dictionary_page_offset + 1, first.data_page_offset + 1) is None


def test_a_split_parquet_file_read_by_shards_gives_each_row_once(tmp_path: Path) -> None:
    """Large Parquet files (a dataset's shards are often gigabytes) spread over array tasks by piece."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    table = pa.table({"n": list(range(5000)), "text": ["word " * (i % 37) for i in range(5000)]})
    pq.write_table(table, src / "big.parquet", row_group_size=100)  # about 80 KiB in 50 row groups
    pq.write_table(table.slice(0, 10), src / "small.parquet")
    per_shard = []
    for index in range(3):
        reader = ParquetReader(src, blocksize="4KiB", split_files=True, fields=["n", "text"])
        result = (
            Pipeline("p")
            .add_stage(reader)
            .add_stage(ParquetWriter(out))
            .run(LocalExecutor(workers=1), shard=ShardSpec.explicit(index, 3, strategy="balanced"))
        )
        per_shard.append(result.source_tasks_mine)
    # A piece holding only the footer (about 20 KiB of metadata for 50 row groups) reads nothing.
    assert sum(per_shard) > len(output_files(out)) > 15 and all(per_shard)
    assert sorted(r["n"] for r in output_rows(out)) == sorted([*range(5000), *range(10)])
    with pytest.raises(PipelineFailedError) as info:
        run(Pipeline("p").add_stage(ParquetReader(src, blocksize="16KiB", split_files=True, fields=["lang"]))
            .add_stage(ParquetWriter(tmp_path / "out2")))  # fmt: skip
    errors = {f.error for f in info.value.result.failed}  # type: ignore[attr-defined]
    assert any(re.search(r"big\.parquet \(bytes \d+-\d+\): missing field\(s\) \['lang'\]", e) for e in errors), errors


def test_a_bad_line_fails_only_its_piece_and_is_named_by_its_line_in_the_file(tmp_path: Path) -> None:
    src, out = tmp_path / "in", tmp_path / "out"
    lines = [json.dumps({"n": i, "text": "x" * 30}) for i in range(400)]
    lines[321] = '{"n": 321, "text": "unterminated}'
    (src).mkdir()
    (src / "big.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(PipelineFailedError) as info:
        run(Pipeline("p").add_stage(JsonlReader(src, blocksize="2KiB", split_files=True)).add_stage(JsonlWriter(out)))
    (failed,) = info.value.result.failed  # type: ignore[attr-defined]
    assert f"{src / 'big.jsonl'}:322: malformed JSON" in failed.error
    survivors = sorted(r["n"] for r in output_rows(out))
    assert 321 not in survivors and len(survivors) > 300, "the other pieces were written"
    assert info.value.result.done == len(output_files(out))  # type: ignore[attr-defined]


def test_a_schema_gives_every_file_and_piece_the_same_column_types(tmp_path: Path) -> None:
    """Types are inferred per file (and per piece): a field that is an integer in one file and a float
    in another, or null or missing throughout one, gives output files with different schemas. A
    declared schema makes them all alike, as a downstream reader of the output directory expects."""
    src = tmp_path / "in"
    write_jsonl(src / "a.jsonl", [{"text": "a", "score": 1, "lang": "en"}] * 3)
    write_jsonl(src / "b.jsonl", [{"text": "b", "score": 0.5, "lang": None}] * 3)
    write_jsonl(src / "c.jsonl", [{"text": "c"}] * 300)  # big enough to be cut into pieces below

    def run_with(schema: dict[str, Any] | None, out: Path) -> set[pa.Schema]:
        reader = JsonlReader(src, blocksize="2KiB", split_files=True, schema=schema)
        run(Pipeline("p").add_stage(reader).add_stage(ParquetWriter(out)))
        return {pq.read_schema(p).remove_metadata() for p in output_files(out)}

    with pytest.raises(
        PipelineFailedError, match=r"incompatible schemas .*score has incompatible types: int64 vs double"
    ):
        run_with(None, tmp_path / "inferred")  # a.jsonl and b.jsonl share a group
    assert all("score" not in pq.read_schema(p).names for p in output_files(tmp_path / "inferred"))
    (declared,) = run_with({"score": "float64", "lang": pa.string()}, tmp_path / "declared")
    assert len(output_files(tmp_path / "declared")) > 3, "c.jsonl was cut into pieces"
    assert declared.field("score").type == pa.float64() and declared.field("lang").type == pa.string()


def test_a_value_that_does_not_fit_the_schema_is_named_by_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "in"
    write_jsonl(src / "a.jsonl", [{"n": 1}, {"n": 2}, {"n": "three"}])
    with pytest.raises(PipelineFailedError) as info:
        run(Pipeline("p").add_stage(JsonlReader(src, schema={"n": "int64"})).add_stage(JsonlWriter(tmp_path / "out")))
    (failed,) = info.value.result.failed  # type: ignore[attr-defined]
    assert f"{src / 'a.jsonl'}:3: field 'n' is a string here but the reader's schema declares int64" in failed.error


def test_split_files_and_schema_are_refused_where_they_cannot_work(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"split_files=True needs blocksize"):
        JsonlReader(tmp_path, split_files=True)
    with pytest.raises(ValueError, match=r"ParquetReader\(schema=...\): these files carry their own types"):
        ParquetReader(tmp_path, schema={"n": "int64"})
    with pytest.raises(ValueError, match=r"schema field 'n': unknown type 'integer'"):
        JsonlReader(tmp_path, schema={"n": "integer"})


def test_limit_caps_the_number_of_partitions(corpus: Path, tmp_path: Path) -> None:
    """limit=N keeps the first N partitions (of the sorted files) and reads only those."""
    groups = partitions(corpus, files_per_partition=5, limit=2)
    assert names(groups) == [[f"part-{i:05d}.jsonl" for i in range(5)], [f"part-{i:05d}.jsonl" for i in range(5, 10)]]
    result = run(
        Pipeline("p").add_stage(JsonlReader(corpus, files_per_partition=5, limit=2)).add_stage(JsonlWriter(tmp_path))
    )
    assert len(result.output_files) == 2
    assert len(output_rows(tmp_path)) == 10 * 60


def test_partitions_of_a_pipeline_cover_every_input_row_once(corpus: Path, tmp_path: Path) -> None:
    """files_per_partition=5 over 12 files writes 3 files holding each input document exactly once."""
    result = run(Pipeline("p").add_stage(JsonlReader(corpus, files_per_partition=5)).add_stage(ParquetWriter(tmp_path)))
    assert len(result.output_files) == 3
    expected = [row for p in sorted(corpus.glob("*.jsonl")) for row in read_jsonl_rows(p)]
    assert as_multiset(output_rows(tmp_path)) == as_multiset(expected)


def test_hidden_files_and_other_extensions_are_not_read(tmp_path: Path) -> None:
    """Directory listing skips hidden files (unfinished writes) and files without a reader extension."""
    write_jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    write_jsonl(tmp_path / ".a.jsonl.tmp-1-abc", [{"text": "partial"}])
    write_jsonl(tmp_path / ".hidden.jsonl", [{"text": "hidden"}])
    (tmp_path / "notes.txt").write_text("not data")
    write_jsonl(tmp_path / "sub" / "b.jsonl", [{"text": "y"}])
    assert names(partitions(tmp_path, file_extensions=[".jsonl"])) == [["a.jsonl"], ["b.jsonl"]]


# --- deterministic ids and names ------------------------------------------------------------------


def test_file_group_id_does_not_depend_on_path_order(corpus: Path) -> None:
    """A file group's id is a hash of its sorted absolute paths, whatever order they come in."""
    files = sorted(str(p) for p in corpus.glob("*.jsonl"))[:4]
    ids = {FileGroupTask.from_paths(order).task_id for order in (files, files[::-1], files[2:] + files[:2])}
    assert ids == {content_id(*files)}
    assert FileGroupTask.from_paths(files).data == files


def test_partition_ids_do_not_depend_on_listing_order(corpus: Path) -> None:
    """Listing the same files in any order, or as their directory, gives the same groups and ids."""
    files = sorted(str(p) for p in corpus.glob("*.jsonl"))
    expected = [(g.task_id, g.data) for g in partitions(corpus, files_per_partition=5)]
    for order in (files[::-1], files[5:] + files[:5]):
        assert [(g.task_id, g.data) for g in partitions(order, files_per_partition=5)] == expected


_PRINT_IDS = """
import json, sys
from curator_slurm.stages import FilePartitioningStage
from curator_slurm.tasks import EmptyTask
groups = FilePartitioningStage(sys.argv[1:], files_per_partition=5).process(EmptyTask())
print(json.dumps([g.task_id for g in groups]))
"""


def test_partition_ids_are_identical_across_processes_and_hash_seeds(corpus: Path) -> None:
    """Separate interpreters with different PYTHONHASHSEED, path orders and working directories (relative
    paths) compute the same partition ids as this process."""
    files = sorted(p.name for p in corpus.glob("*.jsonl"))
    expected = [g.task_id for g in partitions(corpus, files_per_partition=5)]
    assert len(set(expected)) == 3
    outputs = []
    for seed, order in (("0", files), ("1", files[::-1]), ("4242", files[3:] + files[:3])):
        proc = subprocess.run(
            [sys.executable, "-c", _PRINT_IDS, *order],
            cwd=corpus,
            env=clean_env({"PYTHONHASHSEED": seed}),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        outputs.append(json.loads(proc.stdout))
    assert outputs == [expected] * 3


@pytest.mark.parametrize("writer", [ParquetWriter, JsonlWriter])
def test_output_names_are_source_task_ids(corpus: Path, tmp_path: Path, writer: type) -> None:
    """Each output file is named <source task id><extension>, the id being the hash of the partition's files
    relative to the reader's root."""
    groups = partitions(corpus, files_per_partition=4)
    result = run(Pipeline("p").add_stage(JsonlReader(corpus, files_per_partition=4)).add_stage(writer(tmp_path)))
    expected = {g.task_id + writer.extension for g in groups}
    assert {p.name for p in output_files(tmp_path)} == expected
    assert result.output_files == sorted(str(tmp_path / name) for name in expected)
    assert {g.task_id for g in groups} == {content_id(*(os.path.relpath(p, corpus) for p in g.data)) for g in groups}


@pytest.mark.parametrize("writer", [ParquetWriter, JsonlWriter])
def test_rerun_gives_byte_identical_files_with_the_same_names(corpus: Path, tmp_path: Path, writer: type) -> None:
    """Running the same pipeline again yields the same files byte for byte: when it really rewrites them
    (a fresh run directory, or a fresh output directory) and when its ledger makes it skip them."""

    def pipeline(out: Path) -> Pipeline:
        return (
            Pipeline("p")
            .add_stage(JsonlReader(corpus, files_per_partition=4))
            .add_stage(ScoreFilter(WordCountFilter(min_words=50), score_field="words"))
            .add_stage(writer(out))
        )

    executor = LocalExecutor(workers=1, retry_backoff=0)
    run(pipeline(tmp_path / "a"))
    first = read_tree(tmp_path / "a")
    assert len(first) == 3
    again = pipeline(tmp_path / "a").run(executor, shard=ShardSpec.single(), run_dir=tmp_path / "fresh-ledger")
    assert len(again.output_files) == 3
    assert read_tree(tmp_path / "a") == first
    skipped = run(pipeline(tmp_path / "a"))
    assert skipped.source_tasks_skipped == 3
    assert read_tree(tmp_path / "a") == first
    run(pipeline(tmp_path / "b"))
    assert read_tree(tmp_path / "b") == first


# --- bad input ------------------------------------------------------------------------------------

GOOD = [{"id": i, "text": f"document number {i}"} for i in range(3)]

BAD_JSONL = [
    pytest.param(b'{"id": 1}\n{"id": 2}\n{"id": 3,\n{"id": 4}\n', ["bad.jsonl:3", "malformed JSON"], id="malformed"),
    pytest.param(b'{"id": 1}\n\n\n{"id": 2\n', ["bad.jsonl:4", "malformed JSON"], id="malformed-after-blank-lines"),
    pytest.param(b'{"text": "ok"}\n{"text": "caf\xe9"}\n', ["bad.jsonl:2", "not valid UTF-8"], id="latin1-value"),
    pytest.param(b"", ["bad.jsonl", "empty (0 bytes)"], id="empty-file"),
    pytest.param(
        b"\n\n",
        ["bad.jsonl", "no JSON records"],
        id="blank-lines-only",
    ),
    pytest.param(
        b'{"text": "ok"}\n{"\xe9t\xe9": "x"}\n',
        ["bad.jsonl:2", "not valid UTF-8"],
        id="latin1-key",
    ),
    pytest.param(
        b'{"text": "ok"}\n["not", "an", "object"]\n',
        ["bad.jsonl:2"],
        id="not-an-object",
    ),
    pytest.param(
        b'{"text": "a", "n": 1}\n{"text": "b", "n": 2}\n{"text": "c", "n": "three"}\n',
        ["bad.jsonl:3"],
        id="type-change",
    ),
]


@pytest.mark.parametrize(("content", "expected"), BAD_JSONL)
def test_bad_jsonl_fails_its_partition_with_file_and_line(tmp_path: Path, content: bytes, expected: list[str]) -> None:
    """A bad JSONL file fails only its own partition, on the first attempt, with an error naming the file
    (and line); the good partitions are written and no temporary file is left behind."""
    src, out = tmp_path / "in", tmp_path / "out"
    write_jsonl(src / "good-1.jsonl", GOOD)
    write_jsonl(src / "good-2.jsonl", GOOD[:2])
    (src / "bad.jsonl").write_bytes(content)
    good_ids = {g.task_id for g in partitions([src / "good-1.jsonl", src / "good-2.jsonl"])}

    with pytest.raises(PipelineFailedError) as info:
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(out)))

    result = info.value.result
    assert isinstance(result, PipelineResult)
    assert result.done == 2
    (failed,) = result.failed
    assert isinstance(failed, FailedTask)
    for text in expected:
        assert text in failed.error
    assert failed.stage == "jsonl_reader"
    assert failed.attempts == 1
    assert failed.source_id == content_id("bad.jsonl")
    assert "bad.jsonl" in str(info.value)

    assert {p.name for p in output_files(out)} == {i + ".jsonl" for i in good_ids}
    assert leftovers(out) == []
    assert sorted(r["id"] for r in output_rows(out)) == [0, 0, 1, 1, 2]


def test_truncated_parquet_fails_its_partition_naming_the_file(tmp_path: Path) -> None:
    """A truncated Parquet file fails its partition with an error naming it; the others are written."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "text": ["a", "b"]}), src / "good-1.parquet")
    pq.write_table(pa.table({"id": [3], "text": ["c"]}), src / "good-2.parquet")
    whole = (src / "good-1.parquet").read_bytes()
    (src / "trunc.parquet").write_bytes(whole[: len(whole) // 2])

    with pytest.raises(PipelineFailedError) as info:
        run(Pipeline("p").add_stage(ParquetReader(src)).add_stage(ParquetWriter(out)))

    (failed,) = info.value.result.failed
    assert "trunc.parquet: not a readable Parquet file" in failed.error
    assert failed.stage == "parquet_reader"
    assert failed.attempts == 1
    assert sorted(r["id"] for r in output_rows(out)) == [1, 2, 3]
    assert leftovers(out) == []


def test_missing_input_path_is_an_input_error_naming_it(tmp_path: Path) -> None:
    """A missing input path stops the run with an InputError (a CuratorError) whose message starts with
    the path; no source task runs and no output file is written."""
    missing = tmp_path / "no-such-dir"
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        run(Pipeline("p").add_stage(JsonlReader(missing)).add_stage(JsonlWriter(out)))
    assert isinstance(info.value, CuratorError)
    assert str(info.value) == f"{missing}: no such file or directory; check the input path"
    assert not out.exists() or read_tree(out) == {}


def test_directory_without_matching_files_names_the_extensions(tmp_path: Path) -> None:
    """A directory with no file of the reader's extensions stops the run, naming the directory and the
    extensions looked for."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "data.csv").write_text("a,b\n")
    with pytest.raises(InputError) as info:
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(tmp_path / "o1")))
    assert str(info.value).startswith(f"{src}: no files ending in .jsonl, .json, .jsonl.gz")
    with pytest.raises(InputError, match=re.escape(f"{src}: no files ending in .parquet found")):
        run(Pipeline("p").add_stage(ParquetReader(src)).add_stage(JsonlWriter(tmp_path / "o2")))


def test_mistyped_input_path_leaves_output_dir_usable(tmp_path: Path) -> None:
    """A run that fails because the input path is wrong writes nothing; re-running with the right path works."""
    src, out = tmp_path / "in", tmp_path / "out"
    write_jsonl(src / "a.jsonl", GOOD)
    with pytest.raises(InputError):
        run(Pipeline("p").add_stage(JsonlReader(tmp_path / "inn")).add_stage(JsonlWriter(out)))
    assert not out.exists()
    result = run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(out)))
    assert len(result.output_files) == 1


def test_cli_reports_missing_input_without_traceback(tmp_path: Path) -> None:
    """The example job, given a missing input directory, exits non-zero with a one-line message naming it."""
    missing = tmp_path / "no-such-dir"
    proc = run_example(missing, tmp_path / "out", "--workers", "1", check=False)
    assert proc.returncode == 2
    assert f"curate: {missing}: no such file or directory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_reports_bad_line_and_writes_good_partitions(corpus: Path, tmp_path: Path) -> None:
    """The example job, run as a process on a corpus with one broken line, exits 1 with file:line on
    stderr and still writes the other partitions."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    for p in sorted(corpus.glob("*.jsonl"))[:2]:
        shutil.copy(p, src / p.name)
    lines = (corpus / "part-00002.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[6] = lines[6][: len(lines[6]) // 2] + "\n"
    (src / "part-00002.jsonl").write_text("".join(lines), encoding="utf-8")

    proc = run_example(src, out, "--workers", "1", check=False)
    assert proc.returncode == 1
    assert f"{src / 'part-00002.jsonl'}:7: malformed JSON" in proc.stderr
    assert "1 of 3 source tasks failed" in proc.stderr
    assert [p.suffix for p in output_files(out)] == [".parquet"] * 2
    assert leftovers(out) == []


def test_jsonl_output_of_a_fully_filtered_partition_can_be_read_again(tmp_path: Path) -> None:
    """Whatever JsonlWriter writes, JsonlReader can read: chaining two JSONL pipelines works even when a
    filter removed every row of one partition."""
    src = tmp_path / "in"
    write_jsonl(src / "short.jsonl", [{"text": "too short"}])
    write_jsonl(src / "long.jsonl", [{"text": "long enough to keep here"}])
    first = run(
        Pipeline("p1")
        .add_stage(JsonlReader(src))
        .add_stage(ScoreFilter(WordCountFilter(min_words=4)))
        .add_stage(JsonlWriter(tmp_path / "step1"))
    )
    assert [Path(f).name for f in first.output_files] == [Path(first.output_files[0]).name]
    assert output_rows(tmp_path / "step1") == [{"text": "long enough to keep here"}], (
        "no 0-byte file for the empty batch"
    )
    run(Pipeline("p2").add_stage(JsonlReader(tmp_path / "step1")).add_stage(JsonlWriter(tmp_path / "step2")))
    assert output_rows(tmp_path / "step2") == [{"text": "long enough to keep here"}]


# --- atomic, non-destructive writes ---------------------------------------------------------------


class Interrupted(BaseException):
    """Stands in for KeyboardInterrupt/SystemExit during a write."""


@pytest.mark.parametrize("error", [RuntimeError("disk full"), Interrupted()])
def test_atomic_write_failure_leaves_nothing(tmp_path: Path, error: BaseException) -> None:
    """A write that fails halfway leaves no file under the final name and no temporary file."""

    def write(f: BinaryIO) -> None:
        f.write(b"half of the ")
        f.flush()
        raise error

    final = tmp_path / "out.parquet"
    with pytest.raises(type(error)):
        atomic_write(str(final), write)
    assert list(tmp_path.iterdir()) == []


def test_failed_rewrite_keeps_the_earlier_file(tmp_path: Path) -> None:
    """When rewriting an existing output fails, the earlier complete file is untouched."""
    final = tmp_path / "out.jsonl"
    atomic_write(str(final), lambda f: f.write(b"complete\n"))

    def write(f: BinaryIO) -> None:
        f.write(b"trunc")
        raise OSError("no space left on device")

    with pytest.raises(OSError, match="no space left"):
        atomic_write(str(final), write)
    assert final.read_bytes() == b"complete\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    """A successful write replaces the final file completely and leaves no temporary file."""
    final = tmp_path / "out.jsonl"
    final.write_bytes(b"old content that is longer than the new one\n")
    atomic_write(str(final), lambda f: f.write(b"new\n"))
    assert final.read_bytes() == b"new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


@pytest.mark.parametrize("compression", ["snappy", "zstd", "none"])
def test_parquet_writer_writes_the_bytes_pyarrow_parquet_writes(tmp_path: Path, compression: str) -> None:
    """ParquetWriter skips importing pyarrow.parquet (and with it pyarrow.fs) by calling pyarrow's
    lower-level writer; the file must still be the one ``pyarrow.parquet.write_table`` writes, byte for
    byte, for nested, unicode and null values."""
    table = pa.Table.from_pylist(ROWS)
    written = ParquetWriter(tmp_path / "ours", compression=compression).process(DocumentBatch(task_id="t", data=table))
    reference = tmp_path / "reference.parquet"
    pq.write_table(table, reference, compression=compression)
    assert Path(written.data[0]).read_bytes() == reference.read_bytes()
    assert pq.read_table(written.data[0]).to_pylist() == ROWS


def test_a_pipeline_writing_parquet_never_imports_pyarrow_parquet(jsonl_input: Path, tmp_path: Path) -> None:
    """The fast path is the one taken: a fresh process that reads JSONL, filters and writes Parquet has
    not imported pyarrow.parquet or pyarrow.fs (so it has not fallen back to the public writer)."""
    script = (
        "import sys\n"
        "from curator_slurm import LocalExecutor, Pipeline, ShardSpec\n"
        "from curator_slurm.stages import JsonlReader, ParquetWriter, ScoreFilter, WordCountFilter\n"
        "p = Pipeline('p').add_stage(JsonlReader(sys.argv[1])).add_stage(ScoreFilter(WordCountFilter(min_words=0)))\n"
        "result = p.add_stage(ParquetWriter(sys.argv[2])).run(LocalExecutor(workers=1), shard=ShardSpec.single())\n"
        "print(len(result.output_files), sorted(m for m in ('pyarrow.parquet', 'pyarrow.fs') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(jsonl_input), str(tmp_path / "out")],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "[]"]


def test_a_pyarrow_whose_private_writer_differs_gets_the_public_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If pyarrow's private ParquetWriter no longer takes these arguments (it is not a public API), the
    writer falls back to pyarrow.parquet.write_table and writes the same file."""
    from curator_slurm.stages import writers

    def changed_signature(*args: Any, **kwargs: Any) -> None:
        raise TypeError("__cinit__() got an unexpected keyword argument 'writer_engine_version'")

    monkeypatch.setattr(writers._parquet, "ParquetWriter", changed_signature)
    table = pa.Table.from_pylist(ROWS)
    written = ParquetWriter(tmp_path / "ours").process(DocumentBatch(task_id="t", data=table))
    reference = tmp_path / "reference.parquet"
    pq.write_table(table, reference, compression="snappy")
    assert Path(written.data[0]).read_bytes() == reference.read_bytes()


def test_writer_failing_mid_write_leaves_no_partial_file(corpus: Path, tmp_path: Path) -> None:
    """A writer that fails while writing (bad compression codec) records the failure and leaves the
    output directory without any final or temporary file."""
    out = tmp_path / "out"
    pipeline = Pipeline("p").add_stage(JsonlReader(corpus, limit=2)).add_stage(ParquetWriter(out, compression="bogus"))
    with pytest.raises(PipelineFailedError) as info:
        run(pipeline)
    assert len(info.value.result.failed) == 2
    assert {f.stage for f in info.value.result.failed} == {"parquet_writer"}
    assert all("bogus" in f.error for f in info.value.result.failed)
    assert read_tree(out) == {}


def test_writers_never_delete_other_files(corpus: Path, tmp_path: Path) -> None:
    """Files of other names in the output directory (other shards' outputs, notes, hidden files,
    subdirectories) survive a run unchanged; only this run's own names are (re)written."""
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    others = {
        "other-shard.parquet": b"PAR1 not really",
        "notes.txt": b"keep me",
        ".hidden": b"secret",
        "sub/x.jsonl": b'{"a": 1}\n',
    }
    for name, data in others.items():
        (out / name).write_bytes(data)
    result = run(Pipeline("p").add_stage(JsonlReader(corpus, files_per_partition=6)).add_stage(ParquetWriter(out)))
    tree = read_tree(out)
    assert {name: tree[name] for name in others} == others
    assert set(tree) == set(others) | {os.path.basename(p) for p in result.output_files}
    assert len(result.output_files) == 2


def test_existing_output_name_is_overwritten_with_fresh_content(corpus: Path, tmp_path: Path) -> None:
    """A stale file under this run's output name (e.g. from an older run) is replaced, not appended to."""
    out = tmp_path / "out"
    out.mkdir()
    (group,) = partitions(corpus / "part-00000.jsonl")
    (out / f"{group.task_id}.jsonl").write_text("stale\n")
    run(Pipeline("p").add_stage(JsonlReader(corpus / "part-00000.jsonl")).add_stage(JsonlWriter(out)))
    text = (out / f"{group.task_id}.jsonl").read_text(encoding="utf-8")
    assert "stale" not in text
    assert as_multiset(read_jsonl_rows(out / f"{group.task_id}.jsonl")) == as_multiset(
        read_jsonl_rows(corpus / "part-00000.jsonl")
    )


def test_output_is_readable_by_the_matching_reader(corpus: Path, tmp_path: Path) -> None:
    """Every written name matches what list_files would read back (no leading dot, right extension)."""
    out = tmp_path / "out"
    run(Pipeline("p").add_stage(JsonlReader(corpus, limit=3)).add_stage(JsonlWriter(out)))
    names_read = {os.path.basename(p) for g in partitions(out, file_extensions=[".jsonl"]) for p in g.data}
    assert names_read == {p.name for p in output_files(out)}
    assert len(names_read) == 3
    assert all(re.fullmatch(r"[0-9a-f]{16}\.jsonl", n) for n in names_read)

"""Readers on real files: round trips, selected fields, split files read piece by piece, declared schemas,
and clear errors for bad input."""

from __future__ import annotations

import json
import re
import shutil
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_slurm import (
    CuratorError,
    EmptyTask,
    FailedTask,
    InputError,
    LocalExecutor,
    Pipeline,
    PipelineFailedError,
    PipelineResult,
    ShardSpec,
)
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetReader, ParquetWriter
from curator_slurm.stages.io.readers import row_group_start
from curator_slurm.tasks import content_id
from support.docfiles import (
    ROWS,
    ROWS_READ,
    as_multiset,
    jsonl_input_fixture,  # noqa: F401 - a fixture
    leftovers,
    output_files,
    output_rows,
    partitions,
    run,
    with_source,
    write_jsonl,
)
from support.helpers import read_tree

# --- round trips ----------------------------------------------------------------------------------


def test_jsonl_to_parquet_to_jsonl_preserves_every_row_and_field(jsonl_input: Path, tmp_path: Path) -> None:
    """JSONL → Parquet → JSONL keeps every row and every value: unicode, escapes, nested structs,
    lists, empty strings and nulls, with the JSON types of the input."""
    parquet_out, jsonl_out = tmp_path / "pq", tmp_path / "js"
    first = run(Pipeline("to-parquet").add_stage(JsonlReader(jsonl_input)).add_stage(ParquetWriter(parquet_out)))
    assert len(first.output_files) == 3
    assert as_multiset(output_rows(parquet_out)) == as_multiset(ROWS_READ)  # each naming its JSONL file

    second = run(Pipeline("to-jsonl").add_stage(ParquetReader(parquet_out)).add_stage(JsonlWriter(jsonl_out)))
    assert len(second.output_files) == 3
    back = output_rows(jsonl_out)
    assert as_multiset(back) == as_multiset(ROWS_READ)  # the first file_path kept, not the Parquet file's
    assert {type(r["id"]) for r in back} == {int}
    assert {type(r["meta"]["score"]) for r in back if r["meta"]} == {float}


def test_strings_that_look_like_dates_stay_strings(tmp_path: Path) -> None:
    """A string value that happens to look like a date is data, not a timestamp: it round-trips as
    the same string through JSONL and keeps a string type in Parquet."""
    rows = [{"id": 1, "date": "2020-01-01", "when": "2021-05-05T10:00:00"}, {"id": 2, "date": "1999-12-31", "when": ""}]
    write_jsonl(tmp_path / "in" / "d.jsonl", rows)
    run(Pipeline("p").add_stage(JsonlReader(tmp_path / "in")).add_stage(ParquetWriter(tmp_path / "pq")))
    (parquet,) = output_files(tmp_path / "pq")
    assert pq.read_schema(parquet).field("date").type == pa.string()
    run(Pipeline("p").add_stage(JsonlReader(tmp_path / "in")).add_stage(JsonlWriter(tmp_path / "js")))
    assert as_multiset(output_rows(tmp_path / "js")) == as_multiset(with_source(rows, "d.jsonl"))


def test_reader_fields_select_and_order_columns(jsonl_input: Path, tmp_path: Path) -> None:
    """fields=[...] on either reader keeps exactly those columns, in that order, for every row."""
    run(Pipeline("p").add_stage(JsonlReader(jsonl_input, fields=["text", "id"])).add_stage(JsonlWriter(tmp_path / "j")))
    rows = output_rows(tmp_path / "j")
    assert [list(r) for r in rows] == [["text", "id"]] * len(ROWS)
    assert as_multiset(rows) == as_multiset([{"text": r["text"], "id": r["id"]} for r in ROWS])

    run(Pipeline("p").add_stage(JsonlReader(jsonl_input)).add_stage(ParquetWriter(tmp_path / "pq")))
    run(Pipeline("p").add_stage(ParquetReader(tmp_path / "pq", fields=["meta"])).add_stage(JsonlWriter(tmp_path / "m")))
    assert as_multiset(output_rows(tmp_path / "m")) == as_multiset([{"meta": r["meta"]} for r in ROWS])


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
    assert read_pieces(path, blocksize) == [{"i": i, "text": t, "file_path": "f.jsonl"} for i, t in enumerate(texts)]


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
    assert read_pieces(path, blocksize, ParquetReader) == with_source(table.to_pylist(), "f.parquet")
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

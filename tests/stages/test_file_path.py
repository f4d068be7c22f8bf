"""Where each document came from (issue 36.4): every reader adds ``file_path``, the source file relative to the
input root (the whole URI for an object store), keeps the one a document already has (a later phase reading an
earlier phase's output), and makes it only when asked (``fields``, ``file_path_field``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import EmptyTask, LocalExecutor, Pipeline
from curator_slurm.samples import web as web_sample
from curator_slurm.samples.web import _record
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetReader, WarcReader, WetReader
from curator_slurm.workflows.chain import PhaseOutputsReader
from curator_slurm.workflows.workflow import Phase, Workflow
from support.docfiles import output_rows, write_jsonl
from support.helpers import REPO, clean_env
from support.webfixtures import html_root


def read_all(reader: Any) -> list[dict[str, Any]]:
    """Every document ``reader`` makes, task by task, batch by batch (as a pipeline reads them)."""
    rows: list[dict[str, Any]] = []
    for task in reader.partitioner.process(EmptyTask()):
        for batch in reader.reader.stream(task):
            rows.extend(batch.data.to_pylist())
    return rows


@pytest.fixture(name="tree")
def tree_fixture(tmp_path: Path) -> Path:
    """JSONL files in a tree: plain, in a subdirectory, gzip-compressed; and a Parquet file."""
    root = tmp_path / "in"
    write_jsonl(root / "a.jsonl", [{"id": 1, "text": "one"}, {"id": 2, "text": "two"}])
    write_jsonl(root / "sub" / "deeper" / "b.jsonl", [{"id": 3, "text": "three"}])
    packed = root / "c.jsonl.gz"
    packed.write_bytes(pa.compress(b'{"id":4,"text":"four"}\n', "gzip", asbytes=True))
    (root / "p").mkdir()
    pq.write_table(pa.table({"id": [5, 6], "text": ["five", "six"]}), root / "p" / "d.parquet")
    return root


def test_every_jsonl_and_parquet_document_names_its_file_relative_to_the_input_root(tree: Path) -> None:
    rows = read_all(JsonlReader(tree))
    expected = {1: "a.jsonl", 2: "a.jsonl", 3: "sub/deeper/b.jsonl", 4: "c.jsonl.gz"}
    assert {r["id"]: r["file_path"] for r in rows} == expected
    assert read_all(ParquetReader(tree)) == [
        {"id": 5, "text": "five", "file_path": "p/d.parquet"},
        {"id": 6, "text": "six", "file_path": "p/d.parquet"},
    ]
    # A file given by name: its root is its directory; several paths: their common directory.
    assert {r["file_path"] for r in read_all(JsonlReader(tree / "sub" / "deeper" / "b.jsonl"))} == {"b.jsonl"}
    both = JsonlReader([str(tree / "a.jsonl"), str(tree / "sub" / "deeper" / "b.jsonl")])
    assert {r["file_path"] for r in read_all(both)} == {"a.jsonl", "sub/deeper/b.jsonl"}


def test_pieces_of_a_split_file_and_small_batches_name_the_same_file(tmp_path: Path) -> None:
    rows = [{"i": i, "text": "x" * (i % 50)} for i in range(400)]
    write_jsonl(tmp_path / "in" / "big.jsonl", rows)
    read = read_all(JsonlReader(tmp_path / "in", blocksize="2KiB", split_files=True, batch_rows=7))
    assert [r["i"] for r in read] == list(range(400))
    assert {r["file_path"] for r in read} == {"big.jsonl"}


def test_fields_and_file_path_field_decide_whether_the_column_is_made(tree: Path) -> None:
    # fields without it: exactly those fields (what dedup's hashing reads, with_fields included).
    assert {tuple(r) for r in read_all(JsonlReader(tree, fields=["text"]))} == {("text",)}
    assert {tuple(r) for r in read_all(JsonlReader(tree).with_fields(["id"]))} == {("id",)}
    assert {tuple(r) for r in read_all(ParquetReader(tree, fields=["text"]))} == {("text",)}
    # fields with it: made, in the order asked.
    rows = read_all(JsonlReader(tree, fields=["file_path", "id"]))
    assert {tuple(r) for r in rows} == {("file_path", "id")}
    assert {r["id"]: r["file_path"] for r in rows}[3] == "sub/deeper/b.jsonl"
    assert read_all(ParquetReader(tree, fields=["file_path", "id"]))[0] == {"file_path": "p/d.parquet", "id": 5}
    # Off, or under another name.
    assert {tuple(r) for r in read_all(JsonlReader(tree, file_path_field=None))} == {("id", "text")}
    renamed = read_all(JsonlReader(tree, file_path_field="source"))
    assert {r["id"]: r["source"] for r in renamed}[4] == "c.jsonl.gz" and "file_path" not in renamed[0]
    with pytest.raises(ValueError, match="file_path_field=''"):
        JsonlReader(tree, file_path_field="")
    # A missing field is still named.
    with pytest.raises(Exception, match=r"missing field\(s\) \['nope'\]"):
        read_all(JsonlReader(tree / "a.jsonl", fields=["file_path", "nope"]))


def test_a_document_that_already_names_its_file_keeps_it(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "mid" / "x.jsonl", [{"text": "a", "file_path": "crawl/one.warc.gz"}, {"text": "b"}])
    pq.write_table(pa.table({"text": ["c"], "file_path": ["crawl/two.warc.gz"]}), tmp_path / "mid" / "y.parquet")
    rows = read_all(JsonlReader(tmp_path / "mid"))
    assert [r["file_path"] for r in rows] == ["crawl/one.warc.gz", None], "kept as it is, a null too"
    for fields in (None, ["file_path", "text"]):
        assert read_all(ParquetReader(tmp_path / "mid", fields=fields))[0]["file_path"] == "crawl/two.warc.gz"
        assert read_all(JsonlReader(tmp_path / "mid", fields=fields))[0]["file_path"] == "crawl/one.warc.gz"


def test_a_two_phase_chain_keeps_the_first_phase_file_path(tmp_path: Path) -> None:
    src = tmp_path / "in"
    write_jsonl(src / "2024" / "a.jsonl", [{"id": i, "text": f"doc {i}"} for i in range(5)])
    write_jsonl(src / "2025" / "b.jsonl", [{"id": 10 + i, "text": f"doc {i}"} for i in range(3)])
    work, out = tmp_path / "work", tmp_path / "out"
    base = Pipeline("base").add_stage(JsonlReader(src)).add_stage(JsonlWriter(work / "base"))
    final = Pipeline("final").add_stage(PhaseOutputsReader(base, work / ".curator-run" / "base", work / "base"))
    final.add_stage(JsonlWriter(out))
    Workflow("w", work, [Phase("base", base), Phase("final", final)]).run(LocalExecutor(workers=2))
    rows = output_rows(out)
    assert {r["id"]: r["file_path"] for r in rows} == {
        **{i: "2024/a.jsonl" for i in range(5)},
        **{10 + i: "2025/b.jsonl" for i in range(3)},
    }, "the source file, not the intermediate output's hash name"


def test_a_phase_reading_output_without_the_column_names_that_output(tmp_path: Path) -> None:
    src = tmp_path / "in"
    write_jsonl(src / "a.jsonl", [{"id": 1, "text": "x"}])
    work = tmp_path / "work"
    base = Pipeline("base").add_stage(JsonlReader(src, file_path_field=None)).add_stage(JsonlWriter(work / "base"))
    final = Pipeline("final").add_stage(PhaseOutputsReader(base, work / ".curator-run" / "base", work / "base"))
    final.add_stage(JsonlWriter(tmp_path / "out"))
    Workflow("w", work, [Phase("base", base), Phase("final", final)]).run(LocalExecutor(workers=1))
    (row,) = output_rows(tmp_path / "out")
    (written,) = (work / "base").glob("*.jsonl")
    assert row == {"id": 1, "text": "x", "file_path": written.name}


def test_warc_and_wet_documents_name_their_file(tmp_path: Path) -> None:
    root = html_root("python3.11-doc")
    pages = sorted((root / "tutorial").glob("*.html"))[:6]
    warcs = tmp_path / "crawl" / "segments"
    warcs.mkdir(parents=True)
    urls = [(str(p), f"https://docs.example/{p.name}") for p in pages]
    web_sample.write_warc(str(warcs / "one.warc.gz"), urls[:3])
    web_sample.write_warc(str(warcs / "two.warc.gz"), urls[3:], first_number=100)
    for kwargs in ({}, {"blocksize": 4096, "split_files": True}):
        rows = read_all(WarcReader(tmp_path / "crawl", **kwargs))
        assert {r["url"]: r["file_path"] for r in rows} == {
            **{u: "segments/one.warc.gz" for _, u in urls[:3]},
            **{u: "segments/two.warc.gz" for _, u in urls[3:]},
        }
    assert "file_path" in WarcReader(tmp_path / "crawl").reader.outputs()[1]
    assert {tuple(r) for r in read_all(WarcReader(tmp_path / "crawl", fields=["url"]))} == {("url",)}
    wet = tmp_path / "wet" / "a.warc.wet.gz"
    wet.parent.mkdir()
    with open(wet, "wb") as f:
        f.write(_record("conversion", "https://x.example/0", b"some text", 0, {"Content-Type": "text/plain"}))
    assert [r["file_path"] for r in read_all(WetReader(wet))] == ["a.warc.wet.gz"]


def test_the_fineweb_recipe_names_each_document_s_warc_file(tmp_path: Path) -> None:
    """WARC files built from real HTML through examples/fineweb.py (extract, filter, dedup, PII: four phases,
    three of them reading an earlier phase's JSONL): every document names the WARC file its page was in."""
    root = html_root("python3.11-doc")
    pages = sorted(p for d in ("tutorial", "howto") for p in (root / d).glob("*.html"))[:24]
    data = tmp_path / "warcs"
    (data / "2024").mkdir(parents=True)
    where: dict[str, str] = {}
    for k, name in enumerate(["2024/a.warc.gz", "b.warc.gz"]):
        urls = [(str(p), f"https://docs.example/{p.relative_to(root)}") for p in pages[k::2]]
        web_sample.write_warc(str(data / name), urls, first_number=1000 * k)
        where.update({u: name for _, u in urls})
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, str(REPO / "examples" / "fineweb.py"), "--input", str(data), "--output", str(out)],
        env=clean_env(),
        check=True,
        capture_output=True,
        text=True,
    )
    docs = [json.loads(line) for p in sorted(out.glob("*.jsonl")) for line in p.read_text().splitlines()]
    assert len(docs) >= 4, "FineWeb's filters keep some of Python's narrative pages"
    assert all(d["file_path"] == where[d["url"]] for d in docs)
    assert {d["file_path"] for d in docs} == {"2024/a.warc.gz", "b.warc.gz"}

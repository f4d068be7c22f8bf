"""WarcReader and WetReader on WARC files built from real HTML (Debian's documentation packages), Common Crawl
style: every HTML response one document with its fields; other records skipped and counted; byte ranges of a
file read exactly what the whole file gives, ids included; damage keeps the records before it and names the
file and offset in the ledger, `status` and `failures`, without failing the task."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from curator_slurm import Pipeline
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.samples.web import _record, http_response
from curator_slurm.stages import AddId, JsonlWriter, WarcReader, WetReader
from support.docfiles import output_rows, run
from support.helpers import clean_env
from support.webfixtures import build_warc, corrupted_copy, pages, record_offsets, response_urls, truncated_copy

PYTHON_DOCS = "python3.11-doc"


@pytest.fixture(scope="module")
def warc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Common Crawl style .warc.gz: 40 Python documentation pages and 4 images and scripts beside them."""
    html = pages(PYTHON_DOCS, "library/*.html", 40)
    others = pages(PYTHON_DOCS, "_static/*.png", 2) + pages(PYTHON_DOCS, "_static/*.js", 2)
    root = html[0].parents[1]
    return build_warc(tmp_path_factory.mktemp("warc") / "crawl" / "a.warc.gz", sorted(html + others), root)


def read(path: Path, tmp_path: Path, **kwargs: object) -> tuple[list[dict], list[dict]]:
    """The documents a WarcReader pipeline writes for ``path``, and its ledger records."""
    out = tmp_path / "out"
    run(Pipeline("read").add_stage(WarcReader(path, **kwargs)).add_stage(JsonlWriter(out)))
    records = list(iter_records(str(out / DEFAULT_RUN_DIR_NAME)))
    rows = sorted(output_rows(out), key=lambda r: (r.get("url") or "", r["warc_offset"]))
    return rows, records


def test_every_html_response_is_one_document_with_its_fields(warc: Path, tmp_path: Path) -> None:
    """Each HTML response record (as warcio lists them) is one document, in file order, with the page's bytes
    decoded as ``html`` and its WARC and HTTP fields; request, warcinfo and non-HTML records are not documents,
    and the non-HTML responses are counted in the ledger's notes."""
    rows, records = read(warc, tmp_path)
    expected = [(offset, url) for offset, url, kind in response_urls(warc) if kind == "text/html"]
    assert len(expected) == 40
    assert sorted((r["warc_offset"], r["url"]) for r in rows) == sorted(expected)
    from warcio.archiveiterator import ArchiveIterator

    with open(warc, "rb") as f:
        headers = {r.rec_headers.get_header("WARC-Target-URI"): r.rec_headers for r in ArchiveIterator(f)}
    root = pages(PYTHON_DOCS, "library/*.html", 1)[0].parents[1]
    for row in rows:
        h = headers[row["url"]]
        assert row["warc_record_id"] == h.get_header("WARC-Record-ID")
        assert row["warc_date"] == h.get_header("WARC-Date")
        assert (row["content_type"], row["http_status"]) == ("text/html", 200)
        page = root / row["url"].removeprefix("https://docs.example/")
        assert row["html"] == page.read_bytes().decode("utf-8")
    (done,) = records
    assert done["notes"]["counts"] == {"warc_reader: non-HTML payload skipped": 4}


def test_charset_from_http_header_then_meta_tag_then_detection(tmp_path: Path) -> None:
    """The payload's charset comes from the HTTP header, else from the page's meta tag, else detection."""
    text = "Ça coûte très cher, déjà à Zürich"
    russian = "Съешь же ещё этих мягких французских булок да выпей чаю. " * 20
    cases = [
        ("header", "text/html; charset=windows-1252", f"<html><body><p>{text}</p></body></html>", "cp1252"),
        ("meta", "text/html", f'<html><head><meta charset="iso-8859-1"></head><body><p>{text}</p></body>', "latin-1"),
        ("detected", "text/html", f"<html><body><p>{russian}</p></body></html>", "cp1251"),
    ]
    path = tmp_path / "in" / "charsets.warc.gz"
    path.parent.mkdir()
    with open(path, "wb") as f:
        for i, (name, content_type, page, encoding) in enumerate(cases):
            block = http_response(page.encode(encoding), content_type)
            f.write(_record("response", f"https://x.example/{name}", block, i, {"Content-Type": "application/http"}))
    rows, _ = read(path, tmp_path)
    by_name = {r["url"].rsplit("/", 1)[1]: r["html"] for r in rows}
    assert text in by_name["header"] and text in by_name["meta"]
    assert russian.strip() in by_name["detected"]


def test_broken_http_header_is_skipped_and_counted(warc: Path, tmp_path: Path) -> None:
    """A response whose block is not an HTTP response costs that record only, counted in the notes."""
    path = tmp_path / "in" / "broken.warc.gz"
    path.parent.mkdir()
    bad = _record("response", "https://x.example/bad", b"GARBAGE\x00 not http\r\n\r\n<html></html>", 0)
    offsets = record_offsets(warc)
    data = warc.read_bytes()
    path.write_bytes(data[: offsets[5]] + bad + data[offsets[5] :])
    rows, records = read(path, tmp_path)
    assert len(rows) == 40 and "https://x.example/bad" not in {r["url"] for r in rows}
    assert records[0]["notes"]["counts"]["warc_reader: broken HTTP header skipped"] == 1


@pytest.mark.parametrize("form", ["warc.gz", "warc", "warc.zst"])
def test_byte_ranges_read_what_the_whole_file_gives_ids_included(warc: Path, tmp_path: Path, form: str) -> None:
    """A file cut into record-aligned pieces (split_files) gives the same documents as the whole file, with the
    same positions (so the same AddId ids), for multi-member .warc.gz, plain .warc and (whole) .warc.zst."""
    path = tmp_path / "in" / f"a.{form}"
    path.parent.mkdir()
    raw = gzip.decompress(warc.read_bytes())
    if form == "warc.gz":
        path.write_bytes(warc.read_bytes())
    elif form == "warc":
        path.write_bytes(raw)
    else:
        with pa.CompressedOutputStream(str(path), "zstd") as out:
            out.write(raw)

    def ids(**kwargs: object) -> tuple[list[tuple[str, int]], int]:
        out = tmp_path / f"out-{len(kwargs)}"
        result = run(
            Pipeline("ids").add_stage(WarcReader(path, **kwargs)).add_stage(AddId("id")).add_stage(JsonlWriter(out))
        )
        return sorted((r["id"], r["warc_offset"]) for r in output_rows(out)), len(result.output_files)

    whole, one = ids()
    pieces, many = ids(blocksize=path.stat().st_size // 5 + 1, split_files=True)
    assert len(whole) == 40 and pieces == whole
    assert one == 1 and many == (1 if form == "warc.zst" else 5)


def test_truncated_archive_keeps_the_records_before_the_damage_and_names_it(warc: Path, tmp_path: Path) -> None:
    """A .warc.gz cut in the middle of its 21st response: the 20 HTML pages before it are documents, the task
    is done (not failed), and the ledger, `status` and `failures` name the file and the record's offset."""
    responses = response_urls(warc)
    html_before = [u for o, u, kind in responses[:20] if kind == "text/html"]
    cut_record = responses[20][0]
    (tmp_path / "in").mkdir()
    path = truncated_copy(warc, tmp_path / "in" / "cut.warc.gz", cut_record + 300)
    rows, records = read(path, tmp_path)
    assert [r["url"] for r in sorted(rows, key=lambda r: r["warc_offset"])] == html_before
    (done,) = records
    assert done["status"] == "done"
    (damage,) = done["notes"]["damaged"]
    assert damage["file"] == str(path) and damage["offset"] == cut_record
    run_dir = str(tmp_path / "out" / DEFAULT_RUN_DIR_NAME)
    for command in ("status", "failures"):
        shown = subprocess.run(
            [sys.executable, "-m", "curator_slurm.cli", command, run_dir],
            capture_output=True,
            text=True,
            env=clean_env(),
        )
        assert f"{path} at byte {cut_record}: gzip member cut short" in shown.stdout, shown.stdout + shown.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "failures", run_dir, "--json"],
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    assert {"damaged": {**damage, "source": done["source"]}} in json.loads(listed.stdout)


def test_corrupt_record_costs_that_record_only(warc: Path, tmp_path: Path) -> None:
    """Bytes inverted inside the gzip member of one record: that record is lost, every other one is a document
    (reading goes on at the next member), the damage is noted at that record's offset, the task is done."""
    offsets = record_offsets(warc)
    responses = response_urls(warc)
    bad = responses[12][0]
    (tmp_path / "in").mkdir()
    path = corrupted_copy(warc, tmp_path / "in" / "bad.warc.gz", bad + 200)
    rows, records = read(path, tmp_path)
    assert sorted(r["warc_offset"] for r in rows) == [o for o, _, kind in responses if kind == "text/html" and o != bad]
    (damage,) = records[0]["notes"]["damaged"]
    assert damage["offset"] == bad and bad in offsets
    assert records[0]["status"] == "done"


def test_record_types_and_non_html_kept_as_bytes(tmp_path: Path) -> None:
    """record_types selects resource records (no HTTP header: the WARC Content-Type is the payload's);
    keep_non_html keeps non-HTML payloads as bytes in ``content``."""
    page = pages(PYTHON_DOCS, "library/os.html", 1)[0]
    image = pages(PYTHON_DOCS, "_static/*.png", 1)[0]
    path = tmp_path / "in" / "resources.warc.gz"
    path.parent.mkdir()
    with open(path, "wb") as f:
        f.write(_record("resource", "file:///os.html", page.read_bytes(), 0, {"Content-Type": "text/html"}))
        f.write(_record("resource", "file:///logo.png", image.read_bytes(), 1, {"Content-Type": "image/png"}))
    rows, _ = read(path, tmp_path, record_types=["resource"])
    assert [r["url"] for r in rows] == ["file:///os.html"] and rows[0]["http_status"] is None
    reader = WarcReader(path, record_types=["resource"], keep_non_html=True)
    table = reader.reader.read_file(str(path))
    assert table.column("content").to_pylist()[1] == image.read_bytes()
    assert table.column("html").to_pylist() == [page.read_bytes().decode(), None]
    with pytest.raises(ValueError, match="unknown WARC record type 'responses'"):
        WarcReader(path, record_types=["responses"])


def test_wet_reader_reads_conversion_records(tmp_path: Path) -> None:
    """A WET file (conversion records of extracted text) gives one document per record, text as stored."""
    path = tmp_path / "in" / "a.warc.wet.gz"
    path.parent.mkdir()
    texts = ["Erste Seite über Konfiguration.", "第二页的文字。", "third page"]
    with open(path, "wb") as f:
        f.write(_record("warcinfo", "", b"software: test\r\n", 0, {"Content-Type": "application/warc-fields"}))
        for i, text in enumerate(texts):
            extra = {"Content-Type": "text/plain", "WARC-Refers-To": f"<urn:uuid:{i}>"}
            f.write(_record("conversion", f"https://x.example/{i}", text.encode(), i, extra))
    out = tmp_path / "out"
    run(Pipeline("wet").add_stage(WetReader(path)).add_stage(JsonlWriter(out)))
    rows = sorted(output_rows(out), key=lambda r: r["warc_offset"])
    assert [r["text"] for r in rows] == texts
    assert [r["content_type"] for r in rows] == ["text/plain"] * 3


@pytest.mark.parametrize("split", [False, True])
def test_exact_dedup_over_warc_files_keeps_the_first_copy_of_each_page(tmp_path: Path, split: bool) -> None:
    """ExactDuplicates takes a WarcReader unchanged: two crawls that share 6 pages, deduplicated on ``html``
    (whole files, or record-aligned pieces of them), keep each page once, its first copy (file order)."""
    from curator_slurm import LocalExecutor, ShardSpec
    from curator_slurm.settings import RunOptions
    from curator_slurm.workflows.dedup.exact import ExactDuplicates

    html = pages(PYTHON_DOCS, "tutorial/*.html", 14)
    root = html[0].parents[1]
    build_warc(tmp_path / "in" / "a.warc.gz", html[:10], root)
    build_warc(tmp_path / "in" / "b.warc.gz", html[4:], root, first_number=100)
    reader = WarcReader(tmp_path / "in", blocksize=60_000 if split else None, split_files=split)
    from curator_slurm import EmptyTask

    assert len(reader.partitioner.process(EmptyTask())) == (4 if split else 2)  # pieces of 60 kB, or whole files
    out = tmp_path / "out"
    workflow = ExactDuplicates(reader, JsonlWriter(out), text_field="html", buckets=3)
    workflow.run(LocalExecutor(workers=1), shard=ShardSpec.single(), options=RunOptions())
    rows = output_rows(out)
    assert sorted(r["url"] for r in rows) == sorted("https://docs.example/" + str(p.relative_to(root)) for p in html)
    copies_in_b = {r["warc_offset"] for r in rows if r["url"].endswith(tuple(p.name for p in html[4:10]))}
    first = {o for o, u, _ in response_urls(tmp_path / "in" / "a.warc.gz")}
    assert copies_in_b <= first, "the survivor of each duplicated page is its copy in a.warc.gz"


def test_a_warc_file_read_in_batches_gives_the_same_documents_ids_and_notes(warc: Path, tmp_path: Path) -> None:
    """Bounded batches (a batch of at most 7 documents, also of each piece of a split file) hand on the same
    documents with the same positions (AddId), and the skipped records are counted once, whatever the batches."""

    def read_ids(name: str, **kwargs: object) -> tuple[list[tuple[str, int]], dict, int]:
        out = tmp_path / name
        result = run(
            Pipeline("ids").add_stage(WarcReader(warc, **kwargs)).add_stage(AddId("id")).add_stage(JsonlWriter(out))
        )
        (record,) = (r for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done")
        return sorted((r["id"], r["warc_offset"]) for r in output_rows(out)), record["notes"], len(result.output_files)

    whole, notes, files = read_ids("whole")
    batched, batched_notes, batches = read_ids("batched", batch_rows=7)
    assert files == 1 and batches == 1, "40 documents in batches of 7: one file for the source task"
    assert batched == whole and batched_notes == notes and len(whole) == 40
    pieces = run(
        Pipeline("pieces")
        .add_stage(WarcReader(warc, blocksize=warc.stat().st_size // 3 + 1, split_files=True, batch_rows=7))
        .add_stage(AddId("id"))
        .add_stage(JsonlWriter(tmp_path / "pieces"))
    )
    assert sorted((r["id"], r["warc_offset"]) for r in output_rows(tmp_path / "pieces")) == whole
    assert pieces.rows_out == 40

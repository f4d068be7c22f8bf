"""WarcReader against hostile and odd WARC files built from real HTML (Debian's documentation packages): split
and unsplit reads give the same documents whatever the gzip grouping or the payloads (pages quoting WARC
records, stored ``.warc.gz`` responses); damage costs the damaged record only and is noted with file and
offset; a file of random bytes is damage, not silence."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.stages.io.warc import DAMAGED
from curator_slurm.stages.io.warc_records import NO_BOUNDARY
from support.helpers import REPO, clean_env
from support.warclayouts import (
    counted,
    crawl,
    cutting_blocksizes,
    damage,
    documents,
    gzip_members,
    member_offsets,
    plain_offsets,
    quoting_page,
    response,
    stored_warc_gz,
)
from support.webfixtures import pages

PYTHON_DOCS = "python3.11-doc"
EXTRACT = REPO / "examples" / "extract.py"


@pytest.fixture(scope="module")
def records() -> list[bytes]:
    """warcinfo + 40 request/response pairs of real Python documentation pages, plain bytes."""
    return crawl(pages(PYTHON_DOCS, "library/*.html", 40))


def same_documents(path: Path, blocksizes: list[int], expected: int) -> list[dict]:
    """The documents of ``path`` read whole; asserts every split read gives them too, with no damage noted."""
    whole, notes = documents(path)
    assert len(whole) == expected and not damage(notes)
    for blocksize in blocksizes:
        split, split_notes = documents(path, blocksize=blocksize, split_files=True)
        assert split == whole, f"blocksize {blocksize}"
        assert not damage(split_notes), f"blocksize {blocksize}: {damage(split_notes)}"
    return whole


def extract_cli(warcs: Path, out: Path, *args: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, str(EXTRACT), "--input", str(warcs), "--output", str(out), "--workers", "1", *args],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for f in sorted(out.glob("*.jsonl")) for line in f.read_text().splitlines()]
    return sorted(rows, key=lambda r: r["url"])


def test_whole_file_as_one_gzip_member_split_through_the_example(records: list[bytes], tmp_path: Path) -> None:
    """``gzip crawl.warc``: 40 pages in one member. examples/extract.py with --blocksize gives the 40 documents
    the unsplit run gives (not 1), and the split run says once that it read the file as one piece."""
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "crawl.warc.gz"
    path.write_bytes(gzip.compress(b"".join(records)))
    whole = extract_cli(tmp_path / "in", tmp_path / "whole", "--extractor", "resiliparse")
    split = extract_cli(tmp_path / "in", tmp_path / "split", "--extractor", "resiliparse", "--blocksize", "20KiB")
    assert len(whole) > 35 and split == whole
    assert {r["warc_offset"] for r in whole} == {0}, "every record starts in the file's one member, at byte 0"
    notes = [r.get("notes", {}) for r in iter_records(str(tmp_path / "split" / DEFAULT_RUN_DIR_NAME))]
    assert counted(notes, f"warc_reader: {NO_BOUNDARY}") == 1
    assert not damage(notes)


@pytest.mark.parametrize("groups", [[10], [1, 3, 7], [81]])
def test_members_of_many_records_lose_none_and_give_member_offsets(
    records: list[bytes], tmp_path: Path, groups: list[int]
) -> None:
    """Members of 10 records, of 1, 3 and 7, one for all: every response is a document, split or not, with the
    offset of the member its record starts in."""
    path = tmp_path / "grouped.warc.gz"
    path.write_bytes(gzip_members(records, groups))
    size = path.stat().st_size
    whole = same_documents(path, [size // 7, size // 3, 4096], expected=40)
    offsets = member_offsets(records, groups)
    responses = [offsets[i] for i in range(2, len(records), 2)]
    assert [r["warc_offset"] for r in whole] == responses


def test_plain_warc_page_quoting_warc_records_makes_no_phantom(records: list[bytes], tmp_path: Path) -> None:
    """A plain .warc whose 21st page quotes two whole WARC records in a <pre>: split at any size, the file gives
    the 41 pages it holds, and the quoted records are not documents."""
    quoted = [records[1], records[2]]
    page = quoting_page("https://quotes.example/two-records", quoted, 500)
    layout = [*records[:41], page, *records[41:]]
    path = tmp_path / "quoting.warc"
    path.write_bytes(b"".join(layout))
    size, at = path.stat().st_size, plain_offsets(layout)[41]
    inside = cutting_blocksizes(size, at + 100, at + page.index(b"WARC/", 10))  # pieces that start before the quote
    whole = same_documents(path, [*inside, size // 5 + 1, size // 17 + 1], expected=41)
    assert [r["warc_offset"] for r in whole][20] == plain_offsets(layout)[41]
    assert sum("two-records" in r["url"] for r in whole) == 1


@pytest.mark.parametrize("framing", ["gzip members", "plain"])
def test_stored_warc_gz_response_is_one_record(records: list[bytes], tmp_path: Path, framing: str) -> None:
    """A Common Crawl style file holding a response whose payload is itself a Common Crawl style .warc.gz of 30
    pages (its members stored raw in the outer file: look-alikes of record boundaries): split at any size, the
    outer file gives its own 40 pages, no phantom from inside, nothing lost, no damage noted."""
    inner = gzip_members(crawl(pages(PYTHON_DOCS, "tutorial/*.html", 16), first=1000), [1])
    stored = stored_warc_gz("https://archive.example/inner.warc.gz", inner, 900)
    layout = [*records[:21], stored, *records[21:]]
    path = tmp_path / ("stored.warc.gz" if framing != "plain" else "stored.warc")
    path.write_bytes(gzip_members(layout, [1]) if framing != "plain" else b"".join(layout))
    if framing != "plain":
        starts = [i for i in range(len(inner)) if inner.startswith(b"\x1f\x8b\x08", i)]
        raw = sum(path.read_bytes().find(inner[i : i + 300]) > 0 for i in starts)
        assert raw >= 3, "inner members lie raw in the outer file's deflate stream"
    size = path.stat().st_size
    at = (member_offsets(layout, [1]) if framing != "plain" else plain_offsets(layout))[21]
    after = (member_offsets(layout, [1]) if framing != "plain" else plain_offsets(layout))[22]
    inside = cutting_blocksizes(size, at + 1000, after - 20_000, most=6)  # pieces that start among inner members
    whole = same_documents(path, [*inside, size // 4 + 1], expected=40)
    assert not any("inner.warc" in r["url"] or "/100" in r["url"] for r in whole)


def test_corrupt_member_mid_file_costs_that_record_only(records: list[bytes], tmp_path: Path) -> None:
    """Bytes inverted inside one member in the middle of a Common Crawl style file: that response is lost and
    noted (file, its member's offset), every other one is a document, split or not."""
    offsets = member_offsets(records, [1])
    data = bytearray(gzip_members(records, [1]))
    bad = offsets[42]  # the 21st response
    for i in range(bad + 150, bad + 220):
        data[i] ^= 0xFF
    path = tmp_path / "corrupt.warc.gz"
    path.write_bytes(bytes(data))
    whole, notes = documents(path)
    assert [r["warc_offset"] for r in whole] == [offsets[i] for i in range(2, len(records), 2) if offsets[i] != bad]
    (noted,) = damage(notes)
    assert (noted["file"], noted["offset"]) == (str(path), bad)
    assert counted(notes, DAMAGED) == 1
    for blocksize in (len(data) // 6, len(data) // 2):
        split, split_notes = documents(path, blocksize=blocksize, split_files=True)
        assert split == whole and damage(split_notes) == [noted]


def test_random_bytes_are_damage_named_in_the_ledger(tmp_path: Path) -> None:
    """A .warc.gz of random bytes: no document, the task is done, and the ledger names the file as damaged
    at byte 0 (a count and an entry), so the run's summary and status can say records were lost."""
    import random

    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "noise.warc.gz"
    path.write_bytes(random.Random(7).randbytes(300_000))
    out = tmp_path / "out"
    extract_cli(tmp_path / "in", out, "--extractor", "resiliparse")
    (record,) = iter_records(str(out / DEFAULT_RUN_DIR_NAME))
    assert record["status"] == "done"
    (noted,) = record["notes"]["damaged"]
    assert noted["file"] == str(path) and noted["offset"] == 0
    assert record["notes"]["counts"][f"warc_reader: {DAMAGED}"] == 1


def test_truncated_plain_and_trailing_garbage_are_noted(records: list[bytes], tmp_path: Path) -> None:
    """A plain .warc cut inside its last response and a .warc.gz with garbage after its last member: the
    records before are documents and the damage is noted where it starts."""
    cut = tmp_path / "cut.warc"
    data = b"".join(records)
    cut.write_bytes(data[: plain_offsets(records)[-1] + 500])
    rows, notes = documents(cut)
    assert len(rows) == 39 and [d["offset"] for d in damage(notes)] == [plain_offsets(records)[-1]]
    tail = tmp_path / "tail.warc.gz"
    members = gzip_members(records, [1])
    tail.write_bytes(members + b"\x00garbage after the last member")
    rows, notes = documents(tail)
    assert len(rows) == 40 and [d["offset"] for d in damage(notes)] == [len(members)]


def test_record_over_max_record_bytes_is_read_past_and_counted(records: list[bytes], tmp_path: Path) -> None:
    """A response whose block is over max_record_bytes is not kept in memory: read past and counted; the
    records after it are documents."""
    big = response("https://big.example/page", b"<html><body>" + b"<p>big</p>" * 300_000 + b"</body></html>", 700)
    path = tmp_path / "big.warc.gz"
    path.write_bytes(gzip_members([*records[:11], big, *records[11:]], [1]))
    rows, notes = documents(path, max_record_bytes="2MiB")
    assert len(rows) == 40 and "https://big.example/page" not in {r["url"] for r in rows}
    assert counted(notes, "record over max_record_bytes skipped") == 1

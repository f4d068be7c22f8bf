"""A property of WarcReader: for any layout of a WARC file (any number and size of real pages, gzip members of
one record or many or the whole file, plain or gzip, pages quoting WARC records, responses storing a whole
``.warc.gz``), reading it cut into pieces at any block size gives exactly the documents of reading it whole,
with the same record numbers, and each document's ``warc_offset`` is its record's (its gzip member's)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.warclayouts import (
    crawl,
    damage,
    documents,
    gzip_members,
    member_offsets,
    plain_offsets,
    quoting_page,
    stored_warc_gz,
)
from support.webfixtures import pages


@pytest.fixture(scope="module")
def pool() -> list[bytes]:
    """The request and response records of 30 small real pages (Python's documentation), plain bytes."""
    found = pages("python3.11-doc", "**/*.html")
    small = sorted((p for p in found if 2_000 < p.stat().st_size < 30_000), key=lambda p: (p.stat().st_size, p))
    return crawl(small[:30])[1:]


@st.composite
def layouts(draw: st.DrawFn, pool: list[bytes]) -> tuple[list[bytes], list[bool], list[int], bool]:
    """(records, which of them are HTML documents, gzip grouping, gzip or plain)."""
    pairs = draw(st.lists(st.integers(0, len(pool) // 2 - 1), min_size=1, max_size=14))
    records = [r for i in pairs for r in (pool[2 * i], pool[2 * i + 1])]
    is_doc = [k % 2 == 1 for k in range(len(records))]  # request, response, request, ...
    for _ in range(draw(st.integers(0, 2))):  # pages that quote two records of the pool
        a = draw(st.integers(0, len(pool) - 2))
        at = draw(st.integers(0, len(records)))
        records.insert(at, quoting_page(f"https://quotes.example/{len(records)}", [pool[a], pool[a + 1]], 500 + at))
        is_doc.insert(at, True)
    if draw(st.booleans()):  # a response storing a Common Crawl style .warc.gz of some of the pool's pages
        inner_pairs = draw(st.lists(st.integers(0, len(pool) // 2 - 1), min_size=2, max_size=6))
        inner = [r for i in inner_pairs for r in (pool[2 * i], pool[2 * i + 1])]
        at = draw(st.integers(0, len(records)))
        records.insert(at, stored_warc_gz("https://archive.example/inner.warc.gz", gzip_members(inner, [1]), 999))
        is_doc.insert(at, False)
    grouping = draw(st.sampled_from([[1], [1], [2, 1, 5], [10], [1000]]))
    return records, is_doc, grouping, draw(st.booleans())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_split_reads_equal_the_whole_read(pool: list[bytes], tmp_path: Path, data: st.DataObject) -> None:
    records, is_doc, grouping, gzipped = data.draw(layouts(pool))
    path = tmp_path / ("layout.warc.gz" if gzipped else "layout.warc")
    path.write_bytes(gzip_members(records, grouping) if gzipped else b"".join(records))
    offsets = member_offsets(records, grouping) if gzipped else plain_offsets(records)
    whole, notes = documents(path)
    assert not damage(notes)
    assert [r["warc_offset"] for r in whole] == [o for o, doc in zip(offsets, is_doc, strict=True) if doc]
    assert [r["row"] for r in whole] == list(range(sum(is_doc)))
    size = path.stat().st_size
    for blocksize in data.draw(st.lists(st.integers(max(size // 40, 200), size), min_size=1, max_size=3)):
        split, split_notes = documents(path, blocksize=blocksize, split_files=True)
        assert split == whole, f"blocksize {blocksize} of {size}"
        assert not damage(split_notes)


def test_layout_helpers_give_what_gzip_reads(pool: list[bytes]) -> None:
    """The offsets the property checks against come from the layout itself: the members decompress to the
    records, in order, and each member starts where :func:`member_offsets` says."""
    records = pool[:9]
    data = gzip_members(records, [2, 3])
    assert gzip.decompress(data) == b"".join(records)
    starts = sorted(set(member_offsets(records, [2, 3])))
    assert all(data.startswith(b"\x1f\x8b\x08", at) for at in starts) and starts[0] == 0


def test_layouts_do_not_depend_on_the_clock(pool: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis replays a failing example by drawing it again: the bytes a layout makes must be the same at
    any time of day, or a drawn bound (a block size below the file's size) changes between the draws."""
    import time

    records = [*pool[:4], stored_warc_gz("https://archive.example/inner.warc.gz", gzip_members(pool[:4], [1]), 9)]
    first = gzip_members(records, [2])
    monkeypatch.setattr(time, "time", lambda: 4_000_000_000.0)
    assert gzip_members(records, [2]) == first
    assert member_offsets(records, [2]) == member_offsets(records, [2])

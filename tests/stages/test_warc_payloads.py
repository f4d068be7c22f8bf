"""WarcReader on hostile payloads of real pages: a charset that is no text encoding costs nothing; an HTTP header
that lies about the charset (real EUC-KR and ISO-8859-1 pages of Apache's manual sent as UTF-8) gives the text
the page's own ``<meta>`` names, no U+FFFD; U+FFFD only where no charset decodes the bytes, counted; a
Content-Encoding bomb stops inflating at max_record_bytes (bounded memory, a counted drop); br and zstd bodies
are decoded; a corrupt encoding is counted as such."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pyarrow as pa
import pytest

from curator_slurm.stages.io import warc_http
from support.helpers import REPO, clean_env
from support.warclayouts import counted, crawl, damage, documents, gzip_members, plain_record
from support.webfixtures import html_root, pages

PYTHON_DOCS = "python3.11-doc"


def served(url: str, body: bytes, content_type: str, number: int, encoding: str | None = None) -> bytes:
    """A plain response record of ``body`` sent with ``content_type`` (and a Content-Encoding header)."""
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n"
    if encoding:
        head += f"Content-Encoding: {encoding}\r\n"
    block = head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    return plain_record("response", url, block, number, {"Content-Type": "application/http; msgtype=response"})


def write(path: Path, records: list[bytes]) -> Path:
    path.write_bytes(gzip_members(records, [1]))
    return path


@pytest.fixture(scope="module")
def python_pages() -> list[Path]:
    return pages(PYTHON_DOCS, "tutorial/*.html", 8)


@pytest.mark.parametrize("charset", ["hex", "base64", "rot13", "idna", "undefined", "zlib", "uu", "bz2", "nosuch"])
def test_charset_that_is_no_text_encoding_costs_nothing(python_pages: list[Path], tmp_path: Path, charset: str) -> None:
    """One page names ``charset`` in its HTTP header, another in its <meta>: both are documents with their real
    text (UTF-8), and so are the pages beside them; nothing is counted as replaced or dropped."""
    records = crawl(python_pages[2:])[1:]
    header_page, meta_page = python_pages[0].read_bytes(), python_pages[1].read_bytes()
    meta_page = re.sub(rb'<meta charset="utf-8" */?>', f'<meta charset="{charset}">'.encode(), meta_page)
    assert f'charset="{charset}"'.encode() in meta_page
    records.insert(3, served("https://x.example/header", header_page, f"text/html; charset={charset}", 1))
    records.insert(5, served("https://x.example/meta", meta_page, "text/html", 2))
    rows, notes = documents(write(tmp_path / "charsets.warc.gz", records))
    by_url = {r["url"]: r["html"] for r in rows}
    assert len(rows) == 8
    assert by_url["https://x.example/header"] == header_page.decode("utf-8")
    assert by_url["https://x.example/meta"] == meta_page.decode("utf-8")
    assert not damage(notes) and not any(n.get("counts") for n in notes)


@pytest.fixture(scope="module")
def apache_legacy() -> list[tuple[Path, str]]:
    """Apache's manual pages written in EUC-KR or ISO-8859-1, with the charset their <meta> names."""
    found = []
    for page in sorted(html_root("apache2-doc").glob("*/*.html")):
        if page.is_symlink():
            continue
        named = re.search(rb"charset=([A-Za-z0-9_-]+)", page.read_bytes()[:2048])
        if named and named.group(1).lower() in (b"euc-kr", b"iso-8859-1"):
            found.append((page, named.group(1).decode()))
    assert len(found) >= 30
    return found


def test_http_header_lying_about_utf8_gives_the_pages_own_charset(
    apache_legacy: list[tuple[Path, str]], tmp_path: Path
) -> None:
    """Every EUC-KR and ISO-8859-1 page of Apache's manual served as ``charset=utf-8``: its text is its bytes
    decoded with the charset its <meta> names, with no U+FFFD, and no page counts as replaced."""
    records = [
        served(f"https://httpd.example/{i}", page.read_bytes(), "text/html; charset=utf-8", i)
        for i, (page, _) in enumerate(apache_legacy)
    ]
    rows, notes = documents(write(tmp_path / "lying.warc.gz", records))
    assert len(rows) == len(apache_legacy)
    for row, (page, charset) in zip(rows, apache_legacy, strict=True):
        assert row["html"] == page.read_bytes().decode(charset), page
        assert "\ufffd" not in row["html"]
    assert counted(notes, warc_http.REPLACED) == 0


def test_utf8_text_with_stray_bytes_is_replaced_there_and_counted(tmp_path: Path) -> None:
    """A Japanese UTF-8 page of Apache's manual with two stray bytes: kept as UTF-8 with U+FFFD for those two
    bytes only (no single-byte charset guessed for the whole page), and counted."""
    japanese = sorted(html_root("apache2-doc").glob("ja/*.html"))
    page = next(p for p in japanese if not p.is_symlink() and b"UTF-8" in p.read_bytes())
    good = page.read_bytes()
    broken = good.replace(b"<body", b"\xff\xc0<body", 1)
    records = [served("https://x.example/broken", broken, "text/html; charset=utf-8", 1)]
    rows, notes = documents(write(tmp_path / "broken.warc.gz", records))
    assert [r["html"] for r in rows] == [good.decode().replace("<body", "\ufffd\ufffd<body", 1)]
    assert counted(notes, warc_http.REPLACED) == 1


def test_br_and_zstd_bodies_are_decoded_and_corrupt_encodings_counted(python_pages: list[Path], tmp_path: Path) -> None:
    """A page sent with Content-Encoding br, zstd, gzip (and a page labelled gzip but sent plain) gives its
    text; a corrupt gzip body is counted as a corrupt encoding, an unknown one as unknown; none as a broken
    HTTP header."""
    page = python_pages[0].read_bytes()
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    gzipped = gz.compress(page) + gz.flush()
    corrupt = bytearray(gzipped)
    for i in range(40, 90):
        corrupt[i] ^= 0x55
    bodies = {
        "br": (pa.compress(page, "brotli", asbytes=True), "br"),
        "zstd": (pa.compress(page, "zstd", asbytes=True), "zstd"),
        "gzip": (gzipped, "gzip"),
        "plain-labelled-gzip": (page, "gzip"),
        "corrupt": (bytes(corrupt), "gzip"),
        "unknown": (page, "x-snappy-framed"),
    }
    records = [served(f"https://x.example/{k}", b, "text/html", i, e) for i, (k, (b, e)) in enumerate(bodies.items())]
    rows, notes = documents(write(tmp_path / "encodings.warc.gz", records))
    assert {r["url"].rsplit("/", 1)[1]: r["html"] for r in rows} == {
        k: page.decode() for k in ("br", "zstd", "gzip", "plain-labelled-gzip")
    }
    assert counted(notes, warc_http.CORRUPT_ENCODING) == 1
    assert counted(notes, warc_http.UNKNOWN_ENCODING) == 1
    assert counted(notes, warc_http.NOT_ENCODED) == 1
    assert counted(notes, warc_http.BROKEN_HTTP) == 0


def gzip_bomb(size: int) -> bytes:
    """A gzip body that inflates to ``size`` zero bytes (made in pieces: the test never holds ``size`` bytes)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return b"".join(deflate.compress(zeros) for _ in range(size >> 20)) + deflate.flush()


def test_content_encoding_bomb_stops_at_the_cap_with_bounded_memory(python_pages: list[Path], tmp_path: Path) -> None:
    """A 2 MB gzip body inflating to 2 GiB, beside real pages, through examples/extract.py: the bomb is dropped
    and counted at max_record_bytes (64 MiB), the pages are extracted, and the run's peak memory stays far
    below what inflating the bomb would take."""
    (tmp_path / "in").mkdir()
    records = crawl(python_pages)[1:]
    records.insert(4, served("https://bomb.example/", gzip_bomb(2 << 30), "text/html", 99, "gzip"))
    write(tmp_path / "in" / "bomb.warc.gz", records)
    out = tmp_path / "out"
    command = [sys.executable, str(REPO / "examples" / "extract.py"), "--input", str(tmp_path / "in"), "--output"]
    probe = (
        "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)"
    )
    argv = [*command, str(out), "--extractor", "resiliparse", "--workers", "1"]
    proc = subprocess.run([sys.executable, "-c", probe, *argv], env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    peak_mib = int(proc.stdout.strip().splitlines()[-1]) / 1024
    assert peak_mib < 1024, f"peak RSS {peak_mib:.0f} MiB"
    from curator_slurm.runs.ledger import iter_records
    from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME

    (record,) = iter_records(str(out / DEFAULT_RUN_DIR_NAME))
    assert record["status"] == "done"
    assert record["notes"]["counts"][f"warc_reader: {warc_http.OVER_SIZE}"] == 1
    urls = {json.loads(line)["url"] for f in out.glob("*.jsonl") for line in f.read_text().splitlines()}
    assert urls == {f"https://docs.example/{i}/{p.name}" for i, p in enumerate(python_pages)}

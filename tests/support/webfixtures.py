"""Real HTML for the web tests (the Debian packages scripts/html-fixtures.sh installs) and WARC files built from
it, Common Crawl style, with FastWARC's writer (curator_slurm.samples.web); damaged copies for robustness tests.

Missing HTML skips a test on a developer's machine (with the command that installs it) and fails it in CI or
under CURATOR_REQUIRE_SLURM=1, where the fixtures must be there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from curator_slurm.samples import web as web_sample

#: Where each package's HTML is (scripts/html-fixtures.sh prints the same).
HTML_ROOTS = {
    "python3.11-doc": "/usr/share/doc/python3.11/html",
    "apache2-doc": "/usr/share/doc/apache2-doc/manual",
    "debian-handbook": "/usr/share/doc/debian-handbook/html",
}
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("CURATOR_REQUIRE_SLURM") == "1"


def html_root(package: str) -> Path:
    """The directory of ``package``'s HTML; skips (fails in CI) when it is not installed."""
    root = Path(HTML_ROOTS[package])
    if not root.is_dir() or not any(root.iterdir()):
        why = f"{root} is missing: run scripts/html-fixtures.sh (as root) to install {package}"
        if REQUIRED:
            pytest.fail(why)
        pytest.skip(why)
    return root


def pages(package: str, pattern: str = "**/*.html", limit: int | None = None) -> list[Path]:
    """The first ``limit`` HTML pages of ``package`` matching ``pattern``, in sorted order."""
    found = sorted(p for p in html_root(package).glob(pattern) if p.is_file())
    assert found, f"no pages match {pattern} in {html_root(package)}"
    return found[:limit]


def build_warc(path: Path, files: list[Path], root: Path, first_number: int = 0) -> Path:
    """One Common Crawl style ``.warc.gz`` (warcinfo, then request + response per file) of ``files``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    urls = [(str(f), "https://docs.example/" + str(f.relative_to(root))) for f in files]
    web_sample.write_warc(str(path), urls, first_number)
    return path


def build_warcs(out: Path, package: str, files: int, limit: int, others: int = 4) -> list[Path]:
    """``files`` WARC files of the first ``limit`` pages of ``package`` and ``others`` non-HTML files."""
    return [Path(p) for p in web_sample.make_warcs(str(html_root(package)), str(out), files, limit, others)]


def record_offsets(path: Path) -> list[int]:
    """The byte offset of every record of a WARC file, read with warcio (independent of the reader tested)."""
    from warcio.archiveiterator import ArchiveIterator

    with open(path, "rb") as f:
        iterator = ArchiveIterator(f)
        return [iterator.get_record_offset() for _ in iterator]


def response_urls(path: Path) -> list[tuple[int, str, str]]:
    """(offset, URL, identified payload type) of each response record, read with warcio."""
    from warcio.archiveiterator import ArchiveIterator

    out = []
    with open(path, "rb") as f:
        iterator = ArchiveIterator(f)
        for record in iterator:
            if record.rec_type == "response":
                h = record.rec_headers
                out.append(
                    (
                        iterator.get_record_offset(),
                        h.get_header("WARC-Target-URI"),
                        h.get_header("WARC-Identified-Payload-Type"),
                    )
                )
    return out


def truncated_copy(src: Path, dst: Path, cut: int) -> Path:
    """``src`` cut at byte ``cut`` (as an interrupted download leaves it)."""
    dst.write_bytes(src.read_bytes()[:cut])
    return dst


def corrupted_copy(src: Path, dst: Path, at: int, length: int = 64) -> Path:
    """``src`` with ``length`` bytes from ``at`` inverted (a bad disk block inside one gzip member)."""
    data = bytearray(src.read_bytes())
    for i in range(at, min(at + length, len(data))):
        data[i] ^= 0xFF
    dst.write_bytes(bytes(data))
    return dst

"""WARC files from a directory of real HTML pages, Common Crawl style: for the tutorial, tests and benchmarks.

Each output file starts with a ``warcinfo`` record; each page becomes a ``request`` and a ``response`` record
(an HTTP header and the page's bytes, ``WARC-Identified-Payload-Type`` set as Common Crawl sets it), each
record its own gzip member; images and other files found beside the pages become non-HTML responses. Written
with FastWARC's writer. Same pages and arguments, same bytes (record ids and dates come from the path).

    python -m curator_slurm.samples.web /usr/share/doc/python3.11/html warcs/ --files 4 --pages 200
"""

from __future__ import annotations

import argparse
import io
import mimetypes
import os
import uuid

HTML_ENDINGS = (".html", ".htm", ".xhtml")
OTHER_ENDINGS = (".png", ".gif", ".jpg", ".svg", ".css", ".js", ".txt", ".pdf")
_DATE = "2024-01-{day:02d}T{hour:02d}:{minute:02d}:00Z"


def find_pages(root: str, endings: tuple[str, ...] = HTML_ENDINGS) -> list[str]:
    """The files under ``root`` with one of ``endings``, sorted (symbolic links to directories not followed)."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        found.extend(os.path.join(dirpath, n) for n in filenames if n.lower().endswith(endings))
    return sorted(found)


def _record(kind: str, url: str, payload: bytes, number: int, extra: dict[str, str] | None = None) -> bytes:
    """One WARC record as its own gzip member."""
    from fastwarc.stream_io import GzipWriter
    from fastwarc.warc import WarcRecord, WarcRecordType

    record = WarcRecord()
    urn = f"uuid:{uuid.uuid5(uuid.NAMESPACE_URL, kind + ' ' + url)}"
    record.init_headers(getattr(WarcRecordType, kind), urn.encode())
    record.headers["WARC-Date"] = _DATE.format(day=1 + number // 1440 % 28, hour=number // 60 % 24, minute=number % 60)
    if url:
        record.headers["WARC-Target-URI"] = url
    for name, value in (extra or {}).items():
        record.headers[name] = value
    record.set_bytes_content(payload)
    buffer = io.BytesIO()
    writer = GzipWriter(buffer)
    record.write(writer)
    writer.close()
    return buffer.getvalue()


def http_response(body: bytes, content_type: str, status: str = "200 OK") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode("latin-1") + body


def page_records(path: str, url: str, number: int) -> list[bytes]:
    """The request and response records of one file served at ``url`` (as a crawler would fetch it)."""
    with open(path, "rb") as f:
        body = f.read()
    html = path.lower().endswith(HTML_ENDINGS)
    kind = "text/html" if html else (mimetypes.guess_type(path)[0] or "application/octet-stream")
    # Every other page announces no charset: the reader must then find it in the page's meta tag.
    content_type = kind + ("; charset=utf-8" if html and number % 2 == 0 else "")
    request = f"GET {url} HTTP/1.1\r\nHost: docs.example\r\nUser-Agent: curator-sample\r\n\r\n".encode()
    http = {"Content-Type": "application/http; msgtype=request"}
    response = {"Content-Type": "application/http; msgtype=response", "WARC-Identified-Payload-Type": kind}
    return [
        _record("request", url, request, number, http),
        _record("response", url, http_response(body, content_type), number, response),
    ]


def write_warc(out_path: str, files: list[tuple[str, str]], first_number: int = 0) -> None:
    """A ``.warc.gz`` of ``files`` ((path, url) pairs), a warcinfo record first; written to a temporary name
    and renamed."""
    info = b"software: curator-slurm web_sample\r\nformat: WARC File Format 1.1\r\n"
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as out:
        out.write(_record("warcinfo", "", info, first_number, {"Content-Type": "application/warc-fields"}))
        for i, (path, url) in enumerate(files):
            for data in page_records(path, url, first_number + i):
                out.write(data)
    os.replace(tmp, out_path)


def make_warcs(
    html_root: str, out_dir: str, files: int = 4, pages: int | None = None, others: int = 8, prefix: str = "crawl"
) -> list[str]:
    """``files`` WARC files of the pages under ``html_root`` (the first ``pages`` of them, all without it),
    dealt round-robin, plus ``others`` non-HTML files from beside them; returns the paths written."""
    html = find_pages(html_root)[:pages]
    extra = find_pages(html_root, OTHER_ENDINGS)[:others]
    if not html:
        raise FileNotFoundError(f"{html_root}: no HTML pages found; give a directory of .html files")
    chosen = sorted(html + extra)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for k in range(files):
        mine = [(p, "https://docs.example/" + os.path.relpath(p, html_root)) for p in chosen[k::files]]
        path = os.path.join(out_dir, f"{prefix}-{k:05d}.warc.gz")
        write_warc(path, mine, first_number=k * 10_000)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("html_root", help="directory of HTML pages (e.g. /usr/share/doc/python3.11/html)")
    parser.add_argument("out_dir")
    parser.add_argument("--files", type=int, default=4, help="WARC files to write")
    parser.add_argument("--pages", type=int, default=None, help="HTML pages to take (default: all)")
    parser.add_argument("--others", type=int, default=8, help="non-HTML files to add (images, scripts)")
    args = parser.parse_args(argv)
    for path in make_warcs(args.html_root, args.out_dir, args.files, args.pages, args.others):
        print(path)


if __name__ == "__main__":
    main()

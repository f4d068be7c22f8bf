"""Rows w1a-w4: WARC -> text. The corpus is Common Crawl style ``.warc.gz`` files of the Debian Handbook's
English pages (real HTML, ``scripts/html-fixtures.sh`` installs it), made with ``curator_slurm.samples.web``.

w1a-w1c: ``WarcReader -> extractor -> JsonlWriter`` on ``LocalExecutor(workers=1)`` in this process against a
bare loop doing the same work (FastWARC's iterator, the same library call with the same options, JSONL
writes), docs/s, per extractor. w2: ``examples/extract.py --workers 2`` against ``--workers 1`` (Trafilatura),
docs/s of the run as the pipeline times it (interpreter start and imports left out: they are the same for
both and would hide the scaling on a corpus this small). w3: Resiliparse docs/s / Trafilatura docs/s (w1's
pipeline runs). w4 (where ``CURATOR_DATATROVE_PYTHON``, default ``/work/venvs/datatrove/bin/python``, is a
venv with datatrove and the same trafilatura release; else "not measured"): the same job through datatrove's
``WarcReader`` + ``Trafilatura`` + ``JsonlWriter`` against ``extract.py --workers 1``, both timing their run.
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.stages import JsonlWriter, JusTextExtractor, ResiliparseExtractor, TrafilaturaExtractor, WarcReader

from ..context import Bench
from ..harness import BenchError, Measure, Row, available_cores, fresh_dir, progress, rotated, run_child

HANDBOOK = "/usr/share/doc/debian-handbook/html/en-US"
PYTHON_DOCS = "/usr/share/doc/python3.11/html"
EXTRACT = Path(__file__).resolve().parents[3] / "examples" / "extract.py"
DATATROVE_JOB = Path(__file__).resolve().parents[1] / "datatrove_job.py"
TIME_LIMIT = 30.0  # generous: a loaded machine must not make either side drop pages the other keeps


def web_corpus(b: Bench, pages: int, files: int, root: str = HANDBOOK) -> Path:
    """``files`` WARC files of the first ``pages`` pages under ``root``, built once per bench directory."""
    from curator_slurm.samples.web import make_warcs

    if not os.path.isdir(root):
        raise BenchError(f"{root} is missing: run scripts/html-fixtures.sh (as root) to install it")
    path = b.root / "corpora" / f"warc-{Path(root).parts[4]}-{pages}x{files}"
    if not (path / ".complete").exists():
        make_warcs(root, str(path), files=files, pages=pages, others=files)
        (path / ".complete").write_text("")
    return path


_LISTS: dict[str, frozenset[str]] = {}


def _one_page(name: str) -> Callable[[], Callable[[str], str | None]]:
    """A factory (called per file, as a source task starts) of the library call each extractor makes."""

    def trafilatura() -> Callable[[str], str | None]:
        import trafilatura as t
        from trafilatura.deduplication import LRU_SIZE, LRUCache

        cache = LRUCache(maxsize=LRU_SIZE)
        return lambda html: t.extract(html, favor_precision=True, include_comments=False, deduplicate=cache)

    def resiliparse() -> Callable[[str], str | None]:
        from resiliparse.extract.html2text import extract_plain_text

        return lambda html: extract_plain_text(html, main_content=True, alt_texts=False)

    def justext() -> Callable[[str], str | None]:
        import justext as j

        from curator_slurm.stages.extractors.justext import classify, detect_language, stop_list_names

        lists = _LISTS  # the stop lists, each read once when a page first needs it, as the stage does
        options = JusTextExtractor()  # NeMo's parameters, read by classify()

        def one(html: str) -> str | None:
            language = detect_language(html)
            if language not in lists:
                name = stop_list_names().get(language, "")
                if name == "":
                    return None
                lists[language] = j.get_stoplist(name) if name else frozenset()
            keep_all = language in ("THAI", "CHINESE", "JAPANESE", "KOREAN")
            paragraphs = classify(j, html, lists[language], options)
            return "\n\n".join(p.text for p in paragraphs if keep_all or not p.is_boilerplate) or None

        return one

    return {"trafilatura": trafilatura, "resiliparse": resiliparse, "justext": justext}[name]


def bare_loop(corpus: Path, out: Path, name: str) -> tuple[int, float]:
    """The job without the framework: FastWARC's iterator, the library call, one JSONL file per WARC file."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    start = time.perf_counter()
    make = _one_page(name)
    docs = 0
    for path in sorted(corpus.glob("*.warc.gz")):
        extract = make()
        with open(out / (path.name + ".jsonl"), "w", encoding="utf-8") as f:
            for record in ArchiveIterator(str(path), record_types=WarcRecordType.response, parse_http=True):
                kind = record.headers.get("WARC-Identified-Payload-Type") or record.http_content_type
                if kind not in ("text/html", "application/xhtml+xml"):
                    continue
                html = record.reader.read().decode(record.http_charset or "utf-8", errors="replace")
                text = extract(html)
                if not text:
                    continue
                h = record.headers
                row = {
                    "url": h.get("WARC-Target-URI"),
                    "warc_record_id": h.get("WARC-Record-ID"),
                    "warc_date": h.get("WARC-Date"),
                    "content_type": kind,
                    "http_status": record.http_headers.status_code,
                    "warc_offset": record.stream_pos,
                    "text": text,
                }
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                docs += 1
    return docs, time.perf_counter() - start


STAGES: dict[str, Callable[[], Any]] = {
    "trafilatura": lambda: TrafilaturaExtractor(time_limit=TIME_LIMIT),
    "resiliparse": lambda: ResiliparseExtractor(time_limit=TIME_LIMIT),
    "justext": lambda: JusTextExtractor(time_limit=TIME_LIMIT),
}


def pipeline_run(corpus: Path, out: Path, name: str) -> tuple[int, float]:
    pipeline = Pipeline("w1").add_stage(WarcReader(corpus)).add_stage(STAGES[name]()).add_stage(JsonlWriter(out))
    start = time.perf_counter()
    result = pipeline.run(LocalExecutor(workers=1), shard=ShardSpec.single())
    return result.rows_out, time.perf_counter() - start


def cpu_seconds() -> float:
    """User + system seconds of this process and of its children that have ended (the extraction child)."""
    usages = (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    return sum(u.ru_utime + u.ru_stime for u in usages)


def docs_per_s(runs: list[tuple[int, float]]) -> list[float]:
    return [docs / seconds for docs, seconds in runs]


def _agree(runs: dict[str, list[tuple[int, float]]], what: str) -> int:
    counts = {docs for side in runs.values() for docs, _ in side}
    if len(counts) != 1:
        raise BenchError(f"{what}: the sides wrote different numbers of documents: {sorted(counts)}")
    return counts.pop()


def bench_web_loop(b: Bench) -> list[Row]:
    """w1a-w1c and w3."""
    small = web_corpus(b, 8 if b.quick else 24, 4)
    handbook = web_corpus(b, 8 if b.quick else 96, 4)
    python = web_corpus(b, 8 if b.quick else 240, 4, PYTHON_DOCS)  # Resiliparse is fast: more pages
    rows, measured = [], {}
    for key, name, corpus in (
        ("w1a", "trafilatura", small),
        ("w1b", "resiliparse", python),
        ("w1c", "justext", handbook),
    ):
        runs: dict[str, list[tuple[int, float]]] = {"ours": [], "bare": []}
        sides = [("ours", pipeline_run), ("bare", bare_loop)]
        with fresh_dir(b.out("web-warm")) as out:
            bare_loop(corpus, out, name)  # untimed: imports, page cache
        # Both sides run in this process; an extractor with a time limit extracts in a child it reaps at teardown.
        cpu: dict[str, list[float]] = {"ours": [], "bare": []}
        for rep in range(b.repeat):
            for side, fn in rotated(sides, rep):
                progress(f"row {key}: {side} ({name}), repeat {rep + 1}/{b.repeat}")
                with fresh_dir(b.out(f"web-{side}")) as out:
                    started = cpu_seconds()
                    runs[side].append(fn(corpus, out, name))
                    cpu[side].append(cpu_seconds() - started)
        docs = _agree(runs, key)
        measured[name] = Measure(f"{name} pipeline", "docs/s", docs_per_s(runs["ours"]))
        ours_cpu, bare_cpu = statistics.median(cpu["ours"]), statistics.median(cpu["bare"])
        note = (
            f"CPU seconds (median): pipeline {ours_cpu:.2f}, bare loop {bare_cpu:.2f}, ratio {bare_cpu / ours_cpu:.2f}"
        )
        rows.append(
            Row(key, f"WARC -> {name} -> JSONL docs/s: LocalExecutor(workers=1) / bare loop ({docs} docs)",
                measured[name], Measure("bare loop", "docs/s", docs_per_s(runs["bare"])), ">=", 0.9, note=note)
        )  # fmt: skip
    same = []  # Resiliparse on w1a's corpus, so w3 compares the two on the same pages
    for rep in range(b.repeat):
        progress(f"row w3: resiliparse on w1a's pages, repeat {rep + 1}/{b.repeat}")
        with fresh_dir(b.out("web-w3")) as out:
            same.append(pipeline_run(small, out, "resiliparse"))
    rows.append(
        Row("w3", "Resiliparse docs/s / Trafilatura docs/s (pipeline, workers=1, w1a's pages)",
            Measure("resiliparse pipeline", "docs/s", docs_per_s(same)), measured["trafilatura"], "report", 0.0)
    )  # fmt: skip
    return rows


_RESULT = re.compile(r"extract: \d+ files written, \d+ pages in, (\d+) documents out, ([\d.]+) s")


def extract_run(corpus: Path, out: Path, workers: int, time_limit: float = TIME_LIMIT) -> tuple[int, float]:
    """``examples/extract.py`` as a user runs it; (documents, seconds of the run as the pipeline reports it).
    ``time_limit`` 0: no limit (each page extracted in the worker itself)."""
    cmd = [sys.executable, str(EXTRACT), "--input", str(corpus), "--output", str(out), "--workers", str(workers),
           "--time-limit", str(time_limit)]  # fmt: skip
    child = run_child(cmd)
    match = _RESULT.search(child.stdout)
    if match is None:
        raise BenchError(f"extract.py printed no result line: {child.stdout!r}")
    return int(match.group(1)), float(match.group(2))


def bench_web_workers(b: Bench) -> list[Row]:
    """w2: two workers against one, Trafilatura, on 8 files (4 per worker)."""
    corpus = web_corpus(b, 16 if b.quick else 64, 8)
    runs: dict[str, list[tuple[int, float]]] = {"w1": [], "w2": []}
    for rep in range(b.repeat):
        for side in rotated(["w1", "w2"], rep):
            progress(f"row w2: extract.py --workers {side[1]}, repeat {rep + 1}/{b.repeat}")
            with fresh_dir(b.out(f"web-{side}")) as out:
                runs[side].append(extract_run(corpus, out / "text", int(side[1])))
    docs = _agree(runs, "w2")
    return [
        Row("w2", f"extract.py (Trafilatura) docs/s of the run: --workers 2 / --workers 1 ({docs} docs, 8 files, "
            f"{available_cores()} cores)", Measure("--workers 2", "docs/s", docs_per_s(runs["w2"])),
            Measure("--workers 1", "docs/s", docs_per_s(runs["w1"])), ">=", 1.8)
    ]  # fmt: skip


def bench_web_time_limit(b: Bench) -> list[Row]:
    """w5: extract.py (Trafilatura, 1 worker) with its per-page time limit against without one."""
    corpus = web_corpus(b, 16 if b.quick else 96, 1)
    runs: dict[str, list[tuple[int, float]]] = {"limit": [], "none": []}
    for rep in range(b.repeat):
        for side in rotated(["limit", "none"], rep):
            progress(f"row w5: extract.py --time-limit {side}, repeat {rep + 1}/{b.repeat}")
            with fresh_dir(b.out(f"web-w5-{side}")) as out:
                runs[side].append(extract_run(corpus, out / "text", 1, TIME_LIMIT if side == "limit" else 0))
    docs = _agree(runs, "w5")
    return [
        Row("w5", f"extract.py (Trafilatura, 1 worker) docs/s: --time-limit {TIME_LIMIT:g} / no limit ({docs} docs)",
            Measure("time limit", "docs/s", docs_per_s(runs["limit"])),
            Measure("no limit", "docs/s", docs_per_s(runs["none"])), ">=", 0.97)
    ]  # fmt: skip


def datatrove_python() -> str | None:
    """The Python of the venv with datatrove (``CURATOR_DATATROVE_PYTHON``, as for rows d1-d7), or None."""
    python = os.environ.get("CURATOR_DATATROVE_PYTHON", "/work/venvs/datatrove/bin/python")
    return python if os.access(python, os.X_OK) else None


def datatrove_run(python: str, corpus: Path, out: Path) -> tuple[int, float]:
    child = run_child([python, str(DATATROVE_JOB), str(corpus), str(out / "text"), str(TIME_LIMIT)])
    result = json.loads(child.stdout.strip().splitlines()[-1])
    return int(result["docs"]), float(result["seconds"])


def bench_web_datatrove(b: Bench) -> list[Row]:
    """w4: datatrove's WarcReader + Trafilatura + JsonlWriter against extract.py --workers 1."""
    python = datatrove_python()
    title = "WARC -> Trafilatura -> JSONL docs/s, 1 worker: curator-slurm / datatrove 0.10"
    if python is None:  # a report row all the same, saying why (as rows d1-d7 do)
        zero = [0.0]
        why = "not measured: datatrove's venv is missing (set CURATOR_DATATROVE_PYTHON)"
        return [Row("w4", title, Measure("curator-slurm", "docs/s", zero), Measure("datatrove", "docs/s", zero),
                    "report", 0.0, value=0.0, note=why)]  # fmt: skip
    corpus = web_corpus(b, 8 if b.quick else 24, 4)
    sides: list[tuple[str, Callable[[Path], tuple[int, float]]]] = [
        ("ours", lambda out: extract_run(corpus, out / "text", 1)),
        ("datatrove", lambda out: datatrove_run(python, corpus, out)),
    ]
    runs: dict[str, list[tuple[int, float]]] = {"ours": [], "datatrove": []}
    for rep in range(b.repeat):
        for side, fn in rotated(sides, rep):
            progress(f"row w4: {side}, repeat {rep + 1}/{b.repeat}")
            with fresh_dir(b.out(f"web-dt-{side}")) as out:
                runs[side].append(fn(out))
    counts = sorted({docs for side in runs.values() for docs, _ in side})
    return [
        Row("w4", f"{title} (documents written: {counts})",
            Measure("curator-slurm", "docs/s", docs_per_s(runs["ours"])),
            Measure("datatrove", "docs/s", docs_per_s(runs["datatrove"])), "report", 0.0)
    ]  # fmt: skip

"""Rows d1-d7: each datatrove-named filter (``curator_slurm.stages.datatrove``) on a batch of real text
against datatrove's own filter on the same texts, CPU seconds (datatrove / ours, target >= 3).

datatrove runs in its own venv (``$CURATOR_DATATROVE_PYTHON``, default ``/work/venvs/datatrove/bin/python``)
as a subprocess (``bench/peers/datatrove_filters.py``): the project never imports it. Without that Python the
rows are "not measured", with the reason. The same run checks agreement: every document's decision (and C4's
rewritten text, PII's replaced text) must be datatrove's; a row whose decisions differ fails.

The texts: Python's HTML documentation and the Rust book pages found on this machine (tag-stripped, as a
crawler's text is), Python's NEWS in pieces, and the project's sample corpus, in ``$CURATOR_BENCH_DIR``.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

from ..context import Bench
from ..harness import BenchError, Measure, Row, progress

PEER = Path(__file__).resolve().parent.parent / "peers" / "datatrove_filters.py"
ROWS = {
    "d1": "GopherQualityFilter",
    "d2": "GopherRepetitionFilter",
    "d3": "C4QualityFilter",
    "d4": "C4QualityFilter(filter_no_terminal_punct=False)",
    "d5": "FineWebQualityFilter",
    "d6": "PIIFormatter",
    "d7": "URLFilter",
}


def real_texts(limit: int = 2000, seed: int = 0) -> list[dict[str, str]]:
    """Documents of real text found on this machine: HTML pages' text and changelog pieces, with URLs."""
    import lxml.html

    pages = sorted(glob.glob("/usr/share/doc/python3*/html/**/*.html", recursive=True))
    rust = os.path.expanduser("~/.rustup/toolchains/*/share/doc/rust/html/**/*.html")
    pages += sorted(glob.glob(rust, recursive=True))
    random.Random(seed).shuffle(pages)
    docs: list[dict[str, str]] = []
    for path in pages[:limit]:
        try:
            root = lxml.html.parse(path).getroot()
        except (OSError, ValueError):
            continue
        for bad in root.xpath("//script|//style"):
            bad.drop_tree()
        for block in root.xpath("//p|//div|//li|//h1|//h2|//h3|//pre|//br|//tr|//dt|//dd"):
            block.tail = "\n" + (block.tail or "")
        docs.append({"text": root.text_content(), "url": "https://docs.example.org/" + path.split("/html/")[-1]})
    for path in sorted(glob.glob("/usr/share/doc/python3*/NEWS.gz"))[:1]:
        with gzip.open(path, "rt", errors="replace") as f:
            news = f.read()
        for i, part in enumerate(news.split("\n\n\n")[:500]):
            docs.append({"text": part, "url": f"http://www.python.org/news/{i}"})
    return docs


def ours(name: str, lists: str | None) -> Any:
    from curator_slurm.stages import datatrove as dt

    if name.startswith("C4QualityFilter("):
        return dt.C4QualityFilter(filter_no_terminal_punct=False)
    if name == "URLFilter":
        return dt.URLFilter(blocklist_dir=lists)
    return getattr(dt, name)()


def run_ours(name: str, docs: list[dict[str, str]], lists: str | None) -> tuple[float, list[Any]]:
    """(CPU seconds, per-document results in the peer script's format) of our stage on one batch."""
    import pyarrow as pa

    from curator_slurm.stages.datatrove import PIIFormatter
    from curator_slurm.stages.text import spacy_words as _words
    from curator_slurm.stages.text.split import strings
    from curator_slurm.tasks import DocumentBatch

    stage = ours(name, lists)
    _words._cache.clear()  # each row starts cold: no row profits from the words an earlier row tokenized
    table = pa.table({"text": [d["text"] for d in docs], "url": [d.get("url", "") for d in docs]})
    task = DocumentBatch(task_id="bench", dataset_name="bench", data=table)
    stage.process(DocumentBatch(task_id="warm", dataset_name="bench", data=table.slice(0, 50)))
    started = time.process_time()
    if isinstance(stage, PIIFormatter):
        texts = stage.process(task).data.column("text").to_pylist()
        return time.process_time() - started, texts
    decision = stage.decide(strings(table.column(stage.text_field)), task)
    seconds = time.process_time() - started
    results: list[Any] = []
    for i, keep in enumerate(decision.keep.tolist()):
        if not keep:
            results.append(decision.reasons[i])
        elif decision.texts is not None:
            results.append({"text": decision.texts[i].as_py()})
        else:
            results.append(True)
    return seconds, results


def agreement(mine: list[Any], theirs: list[Any]) -> tuple[int, list[int]]:
    """(documents where both agree, the indices of those where they do not)."""
    differ = [i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b]
    return len(mine) - len(differ), differ


def not_measured(key: str, why: str) -> Row:
    """A row that reports why it could not be measured (the table and the JSON still have it)."""
    zero = [0.0]
    title = f"{ROWS[key]}: datatrove's CPU s / ours"
    return Row(key, title, Measure("datatrove", "CPU s", zero), Measure("ours", "CPU s", zero), "report", 0.0,
               value=0.0, note=f"not measured: {why}")  # fmt: skip


def bench_datatrove_filters(b: Bench) -> list[Row]:
    python = os.environ.get("CURATOR_DATATROVE_PYTHON", "/work/venvs/datatrove/bin/python")
    if not os.path.exists(python):
        why = f"datatrove's venv is missing ({python}; set CURATOR_DATATROVE_PYTHON)"
        return [not_measured(key, why) for key in ROWS]
    lists = os.environ.get("CURATOR_DATATROVE_LISTS")
    docs = real_texts(limit=60 if b.quick else 2000)
    if not docs:
        return [not_measured(key, "no HTML documentation on this machine to take text from") for key in ROWS]
    work = Path(b.out("datatrove-filters"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    progress(f"rows d: datatrove's filters on {len(docs)} documents")
    peer_out = work / "datatrove.json"
    command = [python, str(PEER), str(corpus), str(peer_out)] + (["--lists", "1"] if lists else [])
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise BenchError(f"datatrove's filters failed: {done.stderr.strip()[-500:]}")
    report = json.loads(peer_out.read_text(encoding="utf-8"))
    rows = []
    for key, name in ROWS.items():
        if name not in report:
            rows.append(not_measured(key, "no URL block lists (set CURATOR_DATATROVE_LISTS)"))
            continue
        progress(f"row {key}: {name}")
        seconds, mine = run_ours(name, docs, lists)
        same, differ = agreement(mine, report[name]["results"])
        note = f"{same}/{len(docs)} documents decided as datatrove decides"
        note += f"; differ: {differ[:5]}" if differ else ""
        a = Measure(f"datatrove {name}", "CPU s", [report[name]["seconds"]])
        bm = Measure("ours", "CPU s", [seconds])
        title = f"{name}: datatrove's CPU s / ours, {len(docs)} real documents"
        rows.append(Row(key, title, a, bm, ">=", 3.0, note=note))
        if differ:
            rows[-1] = Row(key, rows[-1].title, a, bm, ">=", 3.0, value=0.0, note="DECISIONS DIFFER: " + note)
    return rows

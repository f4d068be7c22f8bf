"""Row fw1: the FineWeb recipe without dedup, WARC files to a PII-formatted corpus on one worker:
``examples/fineweb.py --no-dedup --workers 1`` (through ``bench/fineweb_job.py``) against datatrove's own
pipeline of the same steps (``bench/peers/datatrove_fineweb.py``, in ``CURATOR_DATATROVE_PYTHON``'s venv; "not
measured" without it), WARC pages per second of the run as each side times it, target >= 1.0.

Both sides get the same inputs and the same releases of what they call: the Debian Handbook's English pages as
Common Crawl style WARC files (w1's corpus), datatrove's own URL block lists (unpacked from its package; ours
reads them with ``--url-blocklist``), and one fastText language model: the machine is offline, so instead of
lid.176.bin the bench trains one on the Debian Handbook's 26 translations and puts it where datatrove's
``LanguageFilter`` looks for lid.176.bin (ours gets ``--fasttext-model``). Trafilatura must be one release on
both sides: datatrove 0.10 pins ``trafilatura<1.12`` while ours needs 2.x (``deduplicate=`` taking a cache), so
datatrove's venv holds our release installed over its pin (docs/reference.md says how); the row checks that the
two venvs report the same trafilatura version and is "not measured" otherwise. Its note says where each side's
time goes: extraction, filters, reading and writing, the rest (what no step's timer holds: ours loads the
fastText model in the language filter's setup, so there, datatrove inside its Language ID step). Both sides must
write the same documents (by URL; their texts differ only where PII replacements took turns in another
order, as datatrove's depend on processing order), else the row fails.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..context import Bench
from ..harness import BenchError, Measure, Row, fresh_dir, progress, rotated, run_child
from .web import HANDBOOK, datatrove_python, web_corpus

JOB = Path(__file__).resolve().parents[1] / "fineweb_job.py"
PEER = Path(__file__).resolve().parents[1] / "peers" / "datatrove_fineweb.py"
PER_LANGUAGE = 4000  # training paragraphs per language
TIME_LIMIT = 60.0  # generous: a loaded machine must not make either side drop pages the other keeps
TITLE = "FineWeb recipe without dedup, WARC -> corpus, 1 worker, pages/s: curator-slurm / datatrove 0.10"

#: fastText's trainer, with lid.176.bin's shape (16 dimensions, character 2- to 4-grams, 2M buckets), in a fresh
#: interpreter (0.9.2 can give "Encountered NaN" on a busy machine: retried).
_TRAIN = """
import sys, fasttext
model = fasttext.train_supervised(sys.argv[1], epoch=5, lr=0.5, dim=16, minn=2, maxn=4, bucket=2_000_000,
                                  thread=1, seed=1, verbose=0)
model.save_model(sys.argv[2])
"""


def lid_model(b: Bench) -> Path:
    """A language identifier trained on the Debian Handbook in each of its 26 translations (``__label__en``,
    ``__label__de``, ...: the language part of its directory's name), kept in the bench directory."""
    import lxml.html

    path = b.root / "fasttext" / "lid-handbook.bin"
    if path.exists():
        return path
    books: dict[str, list[str]] = {}
    for book in sorted(Path(HANDBOOK).parent.iterdir()):
        found = books.setdefault(book.name.split("-")[0].lower(), [])
        for page in sorted(book.glob("*.html")):
            text = lxml.html.parse(str(page)).getroot().text_content()
            found += [" ".join(p.split()) for p in text.split("\n") if len(p) >= 40]
    # A translation keeps the paragraphs it has not translated (and commands, names) in English: those go.
    english = set(books["en"])
    lines = []
    for lang, found in books.items():
        mine = found if lang == "en" else [p for p in found if p not in english]
        lines += [f"__label__{lang} {p}" for p in mine[:PER_LANGUAGE]]  # as many of each language
    random.Random(0).shuffle(lines)  # fastText reads in order: one language after another would skew it
    path.parent.mkdir(parents=True, exist_ok=True)
    data = path.with_suffix(".txt")
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for attempt in range(10):
        done = subprocess.run([sys.executable, "-c", _TRAIN, str(data), str(path)], capture_output=True, text=True)
        if done.returncode == 0:
            return path
        if "NaN" not in done.stderr or attempt == 9:
            raise BenchError(f"training the language model failed: {done.stderr[-2000:]}")
    raise AssertionError("unreachable")


def trafilatura_version(python: str) -> str:
    code = "import importlib.metadata as m; print(m.version('trafilatura'))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def _side(result: dict[str, Any]) -> dict[str, Any]:
    """A side's run with its stage seconds grouped: extraction, filters, reading and writing, the rest."""
    groups = {"extraction": 0.0, "filters": 0.0, "read/write": 0.0}
    filters: dict[str, float] = {}
    for name, seconds in result["stages"].items():
        # datatrove names a step "🔻 - FILTER: 👯 Gopher Repetition": the part after the colon, in ASCII.
        phase, _, step = name.partition("/")
        step = " ".join("".join(c for c in step.rpartition(":")[2] if c.isascii()).split())
        name = f"{phase}/{step}"
        low = name.lower()
        if "trafilatura" in low:
            groups["extraction"] += seconds
        elif any(w in low for w in ("reader", "writer", "warc", "jsonl", "phase_outputs")):
            groups["read/write"] += seconds
        else:
            groups["filters"] += seconds
            filters[name.split("/", 1)[1]] = filters.get(name.split("/", 1)[1], 0.0) + seconds
    groups["rest"] = result["seconds"] - sum(groups.values())
    return {**result, "groups": groups, "filters": filters}


def _breakdown(label: str, side: dict[str, Any]) -> str:
    g = side["groups"]
    top = sorted(side["filters"].items(), key=lambda kv: -kv[1])[:4]
    named = ", ".join(f"{n} {s:.1f}" for n, s in top)
    return (
        f"{label} {side['seconds']:.1f} s = extraction {g['extraction']:.1f} + filters {g['filters']:.1f} "
        f"({named}) + read/write {g['read/write']:.1f} + rest {g['rest']:.1f}"
    )


def not_measured(why: str) -> list[Row]:
    zero = [0.0]
    return [Row("fw1", TITLE, Measure("curator-slurm", "pages/s", zero), Measure("datatrove", "pages/s", zero),
                "report", 0.0, value=0.0, note=f"not measured: {why}")]  # fmt: skip


def bench_fineweb_recipe(b: Bench) -> list[Row]:
    python = datatrove_python()
    if python is None:
        return not_measured("datatrove's venv is missing (set CURATOR_DATATROVE_PYTHON)")
    ours_release, theirs_release = trafilatura_version(sys.executable), trafilatura_version(python)
    if ours_release != theirs_release:
        why = f"trafilatura {theirs_release} in datatrove's venv, {ours_release} here: install {ours_release} there"
        return not_measured(why)
    corpus = web_corpus(b, 8 if b.quick else 96, 4, HANDBOOK)
    model, lists = lid_model(b), b.root / "datatrove-lists"
    assets = {"HF_ASSETS_CACHE": str(b.root / "hf-assets"), "HF_HUB_OFFLINE": "1"}
    progress("row fw1: datatrove's lists and the language model in place")
    run_child([python, str(PEER), "prepare", str(lists), str(model)], extra=assets)
    ours_args = ["--input", str(corpus), "--url-blocklist", str(lists), "--fasttext-model", str(model),
                 "--time-limit", str(TIME_LIMIT)]  # fmt: skip
    sides = {
        "ours": lambda out: [sys.executable, str(JOB), str(out / "corpus"), *ours_args],
        "datatrove": lambda out: [python, str(PEER), "run", str(corpus), str(out), str(TIME_LIMIT)],
    }
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "datatrove": []}
    for rep in range(b.repeat):
        for side in rotated(list(sides), rep):
            progress(f"row fw1: {side}, repeat {rep + 1}/{b.repeat}")
            with fresh_dir(b.out(f"fineweb-{side}")) as out:
                child = run_child(sides[side](out), extra=assets)
                runs[side].append(_side(json.loads(child.stdout.strip().splitlines()[-1])))
    pages = {r["pages"] for side in runs.values() for r in side}
    if len(pages) != 1:
        raise BenchError(f"row fw1: the sides read different numbers of pages: {sorted(pages)}")
    docs = {side: sorted({r["docs"] for r in rs}) for side, rs in runs.items()}
    same = len({r["urls"] for rs in runs.values() for r in rs}) == 1
    median = {side: sorted(rs, key=lambda r: r["seconds"])[len(rs) // 2] for side, rs in runs.items()}
    n = pages.pop()
    note = (
        f"trafilatura {ours_release} on both sides; documents written: ours {docs['ours']}, datatrove "
        f"{docs['datatrove']}, {'the same ones (URLs)' if same else 'NOT THE SAME ONES (URLs)'}; seconds of the "
        f"median runs: {_breakdown('ours', median['ours'])}; {_breakdown('datatrove', median['datatrove'])}"
    )
    ours = Measure("curator-slurm", "pages/s", [n / r["seconds"] for r in runs["ours"]])
    theirs = Measure("datatrove", "pages/s", [n / r["seconds"] for r in runs["datatrove"]])
    return [Row("fw1", f"{TITLE} ({n} pages)", ours, theirs, ">=", 1.0, value=None if same else 0.0, note=note)]

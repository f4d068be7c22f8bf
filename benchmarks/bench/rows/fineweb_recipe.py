"""Rows fw1-fw3: the FineWeb recipe, WARC files to a PII-formatted corpus on one worker.

Row fw1: the recipe without dedup,
``examples/fineweb.py --no-dedup --workers 1`` (through ``bench/fineweb_job.py``) against datatrove's own
pipeline of the same steps (``bench/peers/datatrove_fineweb.py``, in ``CURATOR_DATATROVE_PYTHON``'s venv; "not
measured" without it), WARC pages per second of the run as each side times it, target >= 1.0.

Both sides get the same inputs and the same releases of what they call: the Debian Handbook's English pages as
Common Crawl style WARC files (w1's corpus), datatrove's own URL block lists (unpacked from its package; ours
reads them with ``--url-blocklist``), and one fastText language model: the machine is offline, so instead of
lid.176.bin the bench trains one on the Debian Handbook's 26 translations and puts it where datatrove's
``LanguageFilter`` looks for lid.176.bin (ours gets ``--fasttext-model``). Trafilatura must be one release on
both sides: datatrove 0.10 pins ``trafilatura<1.12`` and ours takes 1.x or 2.x, so datatrove's venv holds the
release of ours (over its pin when it is 2.x; docs/reference.md says how); the row checks that the
two venvs report the same trafilatura version and is "not measured" otherwise. Its note says where each side's
time goes: extraction, filters, reading and writing, the rest (what no step's timer holds: ours loads the
fastText model in the language filter's setup, so there, datatrove inside its Language ID step). Both sides must
write the same documents (by URL; their texts differ only where PII replacements took turns in another
order, as datatrove's depend on processing order), else the row fails.

Row fw2: the whole recipe, MinHash dedup included (``examples/fineweb.py --workers 1``: 5-word shingles, 14 bands
of 8 rows), against datatrove's pipeline of the same steps with its own MinHash stages and FineWeb's
``MinhashConfig`` (the same shingles, buckets and hashes per bucket; sha1 shingle hashes at 64 bits), target
>= 1.7 (extraction, the same library call on both sides, is about half of datatrove's time, so about 1.9 is the
ceiling). Its pages are real and many: a third of every language's pages of the Debian Handbook (the same
chapters in each of its 26 translations, 1,118 pages), as one Common Crawl style WARC file. A translation keeps
the chapters it has not translated in English, so the English documents that pass the filters are mostly
near-copies of one another: the dedup phases have real clusters to find. One file, because trafilatura's
duplicate-paragraph cache is process-wide in datatrove and per source task (file) here: on one file both sides
extract with one cache in the same order, and so keep the same documents into dedup (checked: the row fails
otherwise). Which documents survive dedup may differ a little (the hash functions and permutations differ,
MinHash being an estimate; datatrove pairs documents within a bucket in its own way; and ours keeps a cluster's
first document in (file, record) order where datatrove keeps its cluster root): the note counts both sides'
survivors and those they share. The note splits the time as fw1's does, with dedup as its own part, and gives
each side's CPU seconds (the whole process): wall seconds on a shared machine depend on its other load.

Row fw3: row fw2's recipe with ``--extractor resiliparse`` (no peer: datatrove has no Resiliparse extractor),
pages per second of the run on one worker (one core), the value; B is fw2's own Trafilatura runs. The note
gives the pages per CPU second of the whole process.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
from collections.abc import Callable
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
TITLE_FW2 = "FineWeb recipe with MinHash dedup, WARC -> corpus, 1 worker, pages/s: curator-slurm / datatrove 0.10"
TITLE_FW3 = "FineWeb recipe with dedup and Resiliparse, 1 worker (one core), pages/s (value: A) / with Trafilatura"
#: Our dedup phases (``phase/stage`` names): what is not the documents' reading and writing there is dedup.
DEDUP_PHASES = ("signatures", "candidates", "components", "write")

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
    groups = {"extraction": 0.0, "filters": 0.0, "dedup": 0.0, "read/write": 0.0}
    filters: dict[str, float] = {}
    dedup = False
    for name, seconds in result["stages"].items():
        # datatrove names a step "🔻 - FILTER: 👯 Gopher Repetition": the part after the colon, in ASCII.
        phase, _, step = name.partition("/")
        step = " ".join("".join(c for c in step.rpartition(":")[2] if c.isascii()).split())
        name = f"{phase}/{step}"
        low = name.lower()
        if "trafilatura" in low or "resiliparse" in low:
            groups["extraction"] += seconds
        elif "minhash" in low or (phase in DEDUP_PHASES and step not in ("phase_outputs_reader", "jsonl_writer")):
            groups["dedup"] += seconds  # datatrove's MinHash steps; our dedup phases' own work and shuffle files
            dedup = True
        elif any(w in low for w in ("reader", "writer", "warc", "jsonl", "phase_outputs")):
            groups["read/write"] += seconds
        else:
            groups["filters"] += seconds
            filters[name.split("/", 1)[1]] = filters.get(name.split("/", 1)[1], 0.0) + seconds
    groups["rest"] = result["seconds"] - sum(groups.values())
    if not dedup:
        del groups["dedup"]
    return {**result, "groups": groups, "filters": filters}


def _breakdown(label: str, side: dict[str, Any]) -> str:
    g = side["groups"]
    top = sorted(side["filters"].items(), key=lambda kv: -kv[1])[:4]
    named = ", ".join(f"{n} {s:.1f}" for n, s in top)
    dedup = f" + dedup {g['dedup']:.1f}" if "dedup" in g else ""
    return (
        f"{label} {side['seconds']:.1f} s = extraction {g['extraction']:.1f} + filters {g['filters']:.1f} "
        f"({named}){dedup} + read/write {g['read/write']:.1f} + rest {g['rest']:.1f}"
    )


def not_measured(why: str, key: str = "fw1", title: str = TITLE) -> list[Row]:
    zero = [0.0]
    return [Row(key, title, Measure("curator-slurm", "pages/s", zero), Measure("datatrove", "pages/s", zero),
                "report", 0.0, value=0.0, note=f"not measured: {why}")]  # fmt: skip


def run_sides(b: Bench, key: str, sides: dict[str, Callable[[Path], list[str]]]) -> dict[str, list[dict[str, Any]]]:
    """Each side's command ``repeat`` times, interleaved, each in a fresh output directory: its JSON result
    line, grouped (:func:`_side`), with ``cpu``, the CPU seconds of its whole process."""
    assets = {"HF_ASSETS_CACHE": str(b.root / "hf-assets"), "HF_HUB_OFFLINE": "1"}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for rep in range(b.repeat):
        for side in rotated(list(sides), rep):
            progress(f"row {key}: {side}, repeat {rep + 1}/{b.repeat}")
            with fresh_dir(b.out(f"fineweb-{key}-{side}")) as out:
                child = run_child(sides[side](out), extra=assets)
                result = json.loads(child.stdout.strip().splitlines()[-1])
                runs[side].append({**_side(result), "cpu": child.cpu})
    return runs


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


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
    runs = run_sides(b, "fw1", {
        "ours": lambda out: [sys.executable, str(JOB), str(out / "corpus"), *ours_args],
        "datatrove": lambda out: [python, str(PEER), "run", str(corpus), str(out), str(TIME_LIMIT)],
    })  # fmt: skip
    pages = {r["pages"] for side in runs.values() for r in side}
    if len(pages) != 1:
        raise BenchError(f"row fw1: the sides read different numbers of pages: {sorted(pages)}")
    docs = {side: sorted({r["docs"] for r in rs}) for side, rs in runs.items()}
    same = len({r["urls"] for rs in runs.values() for r in rs}) == 1
    median = {side: median_run(rs) for side, rs in runs.items()}
    n = pages.pop()
    note = (
        f"trafilatura {ours_release} on both sides; documents written: ours {docs['ours']}, datatrove "
        f"{docs['datatrove']}, {'the same ones (URLs)' if same else 'NOT THE SAME ONES (URLs)'}; seconds of the "
        f"median runs: {_breakdown('ours', median['ours'])}; {_breakdown('datatrove', median['datatrove'])}"
    )
    ours = Measure("curator-slurm", "pages/s", [n / r["seconds"] for r in runs["ours"]])
    theirs = Measure("datatrove", "pages/s", [n / r["seconds"] for r in runs["datatrove"]])
    return [Row("fw1", f"{TITLE} ({n} pages)", ours, theirs, ">=", 1.0, value=None if same else 0.0, note=note)]


def handbook_corpus(b: Bench) -> Path:
    """Every third page (every 13th with ``--quick``) of each language of the Debian Handbook, the same
    chapters in each, as one WARC file (built once per bench directory)."""
    from curator_slurm.samples.web import find_pages, write_warc

    root = Path(HANDBOOK).parent
    if not root.is_dir():
        raise BenchError(f"{root} is missing: run scripts/html-fixtures.sh (as root) to install it")
    every = 13 if b.quick else 3
    path = b.root / "corpora" / f"warc-handbook-all-every{every}"
    if not (path / ".complete").exists():
        by_language: dict[str, list[str]] = {}
        for page in find_pages(str(root)):
            by_language.setdefault(Path(page).relative_to(root).parts[0], []).append(page)
        chosen = [p for _, pages in sorted(by_language.items()) for i, p in enumerate(sorted(pages)) if i % every == 0]
        path.mkdir(parents=True, exist_ok=True)
        pairs = [(p, "https://docs.example/" + str(Path(p).relative_to(root))) for p in chosen]
        write_warc(str(path / "crawl-00000.warc.gz"), pairs)
        (path / ".complete").write_text("")
    return path


def _urls(runs: dict[str, list[dict[str, Any]]], field: str) -> bool:
    return len({r[field] for rs in runs.values() for r in rs}) == 1


def bench_fineweb_dedup(b: Bench) -> list[Row]:
    """fw2 (the whole recipe against datatrove's, if its venv is there) and fw3 (the same with Resiliparse)."""
    python = datatrove_python()
    ours_release = trafilatura_version(sys.executable)
    why = None
    if python is None:
        why = "datatrove's venv is missing (set CURATOR_DATATROVE_PYTHON)"
    elif (theirs_release := trafilatura_version(python)) != ours_release:
        why = f"trafilatura {theirs_release} in datatrove's venv, {ours_release} here: install {ours_release} there"
    corpus, lists = handbook_corpus(b), b.root / "datatrove-lists"
    # The smoke test without datatrove's venv: CLD2 (built in) instead of training a fastText model first.
    model = lid_model(b) if why is None or not b.quick else None
    if why is None:
        assert python is not None and model is not None
        progress("row fw2: datatrove's lists and the language model in place")
        assets = {"HF_ASSETS_CACHE": str(b.root / "hf-assets"), "HF_HUB_OFFLINE": "1"}
        run_child([python, str(PEER), "prepare", str(lists), str(model)], extra=assets)
    urls = ["--url-blocklist", str(lists)] if why is None else ["--no-url-filter"]
    lid = ["--fasttext-model", str(model)] if model else []
    ours_args = ["--input", str(corpus), *urls, *lid, "--time-limit", str(TIME_LIMIT)]
    sides: dict[str, Callable[[Path], list[str]]] = {
        "ours": lambda out: [sys.executable, str(JOB), str(out / "corpus"), "--dedup", *ours_args],
        "resiliparse": lambda out: [sys.executable, str(JOB), str(out / "corpus"), "--dedup", *ours_args,
                                    "--extractor", "resiliparse"],
    }  # fmt: skip
    if why is None:
        sides["datatrove"] = lambda out: [python, str(PEER), "run", str(corpus), str(out), str(TIME_LIMIT), "--dedup"]
    runs = run_sides(b, "fw2", sides)
    pages = {r["pages"] for side in runs.values() for r in side}
    if len(pages) != 1:
        raise BenchError(f"row fw2: the sides read different numbers of pages: {sorted(pages)}")
    n = pages.pop()
    median = {side: median_run(rs) for side, rs in runs.items()}
    cpu = {side: statistics.median(r["cpu"] for r in rs) for side, rs in runs.items()}
    trafilatura = Measure("curator-slurm", "pages/s", [n / r["seconds"] for r in runs["ours"]])
    resiliparse = Measure("resiliparse", "pages/s", [n / r["seconds"] for r in runs["resiliparse"]])
    rs = median["resiliparse"]
    fw3_note = (
        f"{n / cpu['resiliparse']:.1f} pages per CPU second of the whole process (interpreter start and imports "
        f"included; Trafilatura: {n / cpu['ours']:.1f}); documents into dedup {rs['base_docs']}, written "
        f"{rs['docs']}; seconds of the median run: {_breakdown('resiliparse', rs)}"
        + ("" if why is None else "; no URL filter (datatrove's block lists come from its venv, which is missing)")
        + ("" if model else "; CLD2 as the language filter (a quick run without datatrove's venv)")
    )
    fw3 = Row("fw3", f"{TITLE_FW3} ({n} pages)", resiliparse, Measure("trafilatura", "pages/s", trafilatura.samples),
              "report", 0.0, value=resiliparse.median, note=fw3_note)  # fmt: skip
    if why is not None:
        return [*not_measured(why, "fw2", TITLE_FW2), fw3]
    ours, theirs = runs["ours"], runs["datatrove"]
    same_in = _urls({"ours": ours, "datatrove": theirs}, "base_urls")
    base = sorted({r["base_docs"] for r in ours + theirs})
    out = {side: sorted({r["docs"] for r in runs[side]}) for side in ("ours", "datatrove")}
    shared = _shared_survivors(median)
    note = (
        f"trafilatura {ours_release} on both sides; documents into dedup: {base}, "
        f"{'the same ones (URLs) on both sides' if same_in else 'NOT THE SAME ONES (URLs)'}; written after dedup: "
        f"ours {out['ours']}, datatrove {out['datatrove']}, {shared} of the median runs' in common; CPU seconds of the "
        f"whole process (median): ours {cpu['ours']:.1f}, datatrove {cpu['datatrove']:.1f} (ratio "
        f"{cpu['datatrove'] / cpu['ours']:.2f}); seconds of the median runs: {_breakdown('ours', median['ours'])}; "
        f"{_breakdown('datatrove', median['datatrove'])}"
    )
    theirs_measure = Measure("datatrove", "pages/s", [n / r["seconds"] for r in theirs])
    fw2 = Row("fw2", f"{TITLE_FW2} ({n} pages)", trafilatura, theirs_measure, ">=", 1.7,
              value=None if same_in else 0.0, note=note)  # fmt: skip
    return [fw2, fw3]


def _shared_survivors(median: dict[str, dict[str, Any]]) -> int:
    """How many URLs both sides' median runs wrote (each side's job lists them in ``survivors``)."""
    return len(set(median["ours"]["survivors"]) & set(median["datatrove"]["survivors"]))

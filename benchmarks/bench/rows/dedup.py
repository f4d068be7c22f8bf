"""Rows 10, 12 and 13: the dedup workflows (exact, fuzzy) against plain pyarrow, phase by phase, and
the MinHash signature step against a datasketch-style loop."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import xxhash

from ..context import Bench
from ..corpora import GENERATOR, MARKER
from ..demo import REPO
from ..harness import BenchError, Measure, Row, fresh_dir, progress, rotated, run_child


def bench_fuzzy_signatures(b: Bench) -> list[Row]:
    """Row 12: fuzzy dedup's signature step (normalise, 5-word shingles, 160 MinHash permutations, 20 band
    hashes; curator_slurm.workflows.dedup.minhash) over a batch of ~250-word documents, against a datasketch-style
    loop doing the same work per document and per shingle: Python normalising and splitting, one hash
    per shingle, one numpy update of the 160 minima per shingle (datasketch's ``MinHash.update``, with
    its default SHA-1 shingle hash and its ``(a * x + b) mod (2^61 - 1)`` family), then one xxhash per
    band. docs/s, interleaved, in this process."""
    import hashlib
    import unicodedata

    import numpy as np

    from curator_slurm.workflows.dedup import minhash as mh
    from curator_slurm.workflows.dedup.synthetic import near_duplicate_corpus

    docs = 200 if b.quick else 2000
    corpus = near_duplicate_corpus(unrelated=docs * 3 // 4, originals=docs // 12, copies=(2, 2), words=250, seed=0)
    texts = pa.array(corpus.texts, pa.string())
    ngram, bands, rows, seed = mh.DEFAULT_NGRAM, mh.DEFAULT_BANDS, mh.DEFAULT_ROWS, mh.DEFAULT_SEED
    num_perm = bands * rows
    prime, max_hash = np.uint64((1 << 61) - 1), np.uint64((1 << 32) - 1)
    a, c = (p % prime for p in mh.permutations(num_perm, seed))
    punctuation = re.compile(r"[^\w\s]|_")

    def vectorised() -> np.ndarray:
        offsets, hashes = mh.shingle_hashes(texts, ngram, seed)
        return mh.band_hashes(mh.minhash_signatures(offsets, hashes, num_perm, seed), bands, rows)

    def per_shingle() -> list[list[int]]:
        out = []
        for text in corpus.texts:
            words = punctuation.sub(" ", unicodedata.normalize("NFKC", text).lower()).split()
            grams = [" ".join(words[i : i + ngram]) for i in range(max(1, len(words) - ngram + 1))] if words else []
            minima = np.full(num_perm, max_hash, dtype=np.uint64)
            for gram in grams:  # datasketch's MinHash.update, one shingle at a time
                x = np.uint64(int.from_bytes(hashlib.sha1(gram.encode()).digest()[:4], "little"))
                minima = np.minimum(np.bitwise_and((a * x + c) % prime, max_hash), minima)
            sig = minima.astype(np.uint32)
            out.append([xxhash.xxh64_intdigest(sig[j * rows : (j + 1) * rows].tobytes()) for j in range(bands)])
        return out

    rates: dict[str, list[float]] = {"vectorised": [], "loop": []}
    for rep in range(b.repeat):
        for name in rotated(["vectorised", "loop"], rep):
            progress(f"row 12: {name}, {docs:,} documents, repeat {rep + 1}/{b.repeat}")
            start = time.perf_counter()
            result = vectorised() if name == "vectorised" else per_shingle()
            rates[name].append(docs / (time.perf_counter() - start))
            if len(result) != len(corpus.texts):
                raise BenchError(f"row 12: {name} gave {len(result)} signatures for {len(corpus.texts)} documents")
    return [
        Row("12", f"fuzzy dedup signatures (shingles + {num_perm} MinHash + {bands} bands), vectorised / "
            f"datasketch-style per-shingle loop ({docs:,} docs of ~250 words)",
            Measure("vectorised", "docs/s", rates["vectorised"]), Measure("loop", "docs/s", rates["loop"]), ">=", 5.0,
            note=f"vectorised: {statistics.median(rates['vectorised']):,.0f} docs/s on one core, from the text "
                 "column to the band hashes"),
    ]  # fmt: skip


DEDUP_EXAMPLE = REPO / "examples" / "dedup.py"
#: Row 10's baseline: the same exact dedup (whitespace-normalised text, first occurrence kept) as one
#: process that holds the whole corpus in memory and deduplicates it with pyarrow's group-by.
PLAIN_DEDUP = r"""
import os, sys
import pyarrow as pa, pyarrow.compute as pc, pyarrow.json as pj, pyarrow.parquet as pq
src, out = sys.argv[1], sys.argv[2]
files = sorted(os.path.join(d, f) for d, _, names in os.walk(src) for f in names if f.endswith(".jsonl"))
table = pa.concat_tables([pj.read_json(f) for f in files])
norm = pc.replace_substring_regex(pc.utf8_trim_whitespace(table["text"]), r"\s+", " ")
index = pa.array(range(table.num_rows))
first = pa.table({"norm": norm, "i": index}).group_by("norm").aggregate([("i", "min")])["i_min"]
os.makedirs(out, exist_ok=True)
pq.write_table(table.filter(pc.is_in(index, first)), os.path.join(out, "dedup.parquet"))
"""


@dataclass
class WorkflowRuns:
    """Row 10's and 13's measurements: the workflow and the plain baseline, interleaved; per phase its
    wall times and peak RSS, and the files the last run wrote in each phase's directory."""

    flow: list[float] = field(default_factory=list)
    plain: list[float] = field(default_factory=list)
    wall: dict[str, list[float]] = field(default_factory=dict)
    rss: dict[str, list[float]] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)


def measure_workflow(
    b: Bench, row: str, docs: int, flow_args: list[str], phases: dict[str, str], plain_code: str, source: Path
) -> WorkflowRuns:
    """Run examples/dedup.py ``flow_args`` one process per phase (as array tasks do, workers=1) and the plain
    script ``plain_code SOURCE OUT``, interleaved ``b.repeat`` times; ``phases`` maps each phase, in order, to
    the directory (relative to the output) whose Parquet files it writes."""
    runs = WorkflowRuns(wall={p: [] for p in phases}, rss={p: [] for p in phases})
    for rep in range(b.repeat):
        for side in rotated(["flow", "plain"], rep):
            progress(f"row {row}: {side}, repeat {rep + 1}/{b.repeat}")
            with fresh_dir(b.out(f"{row}-{side}")) as out:
                if side == "plain":
                    runs.plain.append(docs / run_child([sys.executable, "-c", plain_code, str(source), str(out)]).wall)
                    continue
                total = 0.0
                for phase in phases:
                    cmd = [sys.executable, str(DEDUP_EXAMPLE), *flow_args, "--output", str(out), "--workers", "1"]
                    child = run_child(cmd, {"CURATOR_PHASE": phase})
                    total += child.wall
                    runs.rss[phase].append(child.maxrss)
                    runs.wall[phase].append(child.wall)
                runs.flow.append(docs / total)
                runs.files = {p: len(list((out / d).glob("*.parquet"))) for p, d in phases.items()}
    return runs


def bench_exact_dedup(b: Bench) -> list[Row]:
    """Row 10: the exact-dedup workflow (examples/dedup.py: hash, find, write; one process per phase as an
    array task would run it, workers=1) against a plain in-memory pyarrow group-by dedup, docs/s; and each
    phase's files written and peak RSS."""
    corpus = b.corpus("base")
    docs = len(corpus.files) * b.docs_per_file
    b.warm_children()
    phases = {"hash": ".curator-work/shuffle/hash", "find": ".curator-work/duplicates", "write": "."}
    runs = measure_workflow(b, "10", docs, ["--input", str(corpus.path)], phases, PLAIN_DEDUP, corpus.path)
    rows = [
        Row("10a", f"exact dedup, 3 phases, workers=1 / plain pyarrow group-by dedup in memory ({docs:,} docs)",
            Measure("workflow", "docs/s", runs.flow), Measure("plain", "docs/s", runs.plain), ">=", 0.5,
            note="the workflow writes and reads its shuffle through the filesystem; the plain loop holds the "
                 "corpus in memory and cannot be sharded"),
    ]  # fmt: skip
    for key, phase in zip("bcd", phases, strict=True):
        written = runs.files.get(phase, 0)
        rows.append(
            Row(f"10{key}", f"exact dedup phase {phase!r}: peak RSS / base corpus size; {written} files "
                f"written, {statistics.median(runs.wall[phase]):.2f} s",
                Measure(phase, "B", runs.rss[phase]), Measure("corpus", "B", [float(corpus.bytes)]), "report", 0.0)
        )  # fmt: skip
    return rows


#: Row 13's baseline: read every JSONL file and write it as Parquet, the least any dedup must do.
PLAIN_COPY = r"""
import os, sys
import pyarrow.json as pj, pyarrow.parquet as pq
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for d, _, names in os.walk(src):
    for name in sorted(names):
        if name.endswith(".jsonl"):
            pq.write_table(pj.read_json(os.path.join(d, name)), os.path.join(out, name[:-6] + ".parquet"))
"""


def near_duplicate_jsonl(b: Bench) -> tuple[Path, int]:
    """A planted near-duplicate corpus (curator_slurm.workflows.dedup.synthetic) as JSONL files of 1,000 documents,
    generated once (its marker holds the document count)."""
    from curator_slurm.workflows.dedup.synthetic import near_duplicate_corpus

    unrelated, originals = (600, 150) if b.quick else (36_000, 6_000)
    root = b.root / "corpora" / f"near-dup-u{unrelated}-o{originals}-g{GENERATOR}"
    marker = root / MARKER
    if not marker.exists():
        progress(f"row 13: generating a near-duplicate corpus ({unrelated:,} unrelated, {originals:,} originals)")
        texts = near_duplicate_corpus(unrelated=unrelated, originals=originals, seed=1).texts
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        for start in range(0, len(texts), 1000):
            part = range(start, min(start + 1000, len(texts)))
            lines = "\n".join(json.dumps({"id": i, "text": texts[i]}) for i in part)
            (root / f"part-{start // 1000:04d}.jsonl").write_text(lines + "\n")
        marker.write_text(str(len(texts)))
    return root, int(marker.read_text())


def bench_fuzzy_workflow(b: Bench) -> list[Row]:
    """Row 13: the fuzzy-dedup workflow (examples/dedup.py --fuzzy, one process per phase, workers=1) against
    a plain pyarrow loop that reads the same JSONL and writes Parquet, docs/s; and each phase's wall time,
    files written and peak RSS."""
    root, docs = near_duplicate_jsonl(b)
    b.warm_children()
    phases = {"signatures": ".curator-work/shuffle/bands", "candidates": ".curator-work/edges",
              "components": ".curator-work/duplicates", "write": "."}  # fmt: skip
    runs = measure_workflow(b, "13", docs, ["--fuzzy", "--input", str(root)], phases, PLAIN_COPY, root)
    rows = [
        Row("13a", f"fuzzy dedup, 4 phases, workers=1 / plain pyarrow JSONL-to-Parquet copy ({docs:,} docs, "
            "planted near-duplicates)",
            Measure("workflow", "docs/s", runs.flow), Measure("plain copy", "docs/s", runs.plain), ">=", 0.2),
    ]  # fmt: skip
    for key, phase in zip("bcde", phases, strict=True):
        written, speed = runs.files.get(phase, 0), [docs / w for w in runs.wall[phase]]
        rows.append(
            Row(f"13{key}", f"fuzzy dedup phase {phase!r}: docs/s of the phase alone; {written} files "
                f"written, peak RSS {statistics.median(runs.rss[phase]) / 2**20:.0f} MiB",
                Measure(phase, "docs/s", speed), Measure("plain copy", "docs/s", runs.plain), "report", 0.0)
        )  # fmt: skip
    return rows

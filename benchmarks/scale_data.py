"""`make scale-data` (not in CI): the data path's growth laws. Fuzzy dedup (FineWeb's 5-word shingles, 14 bands x 8
rows) on generated corpora of three sizes, each phase in a process of its own (one array task's work: the whole
phase, one worker), recorded per phase: CPU seconds, peak RSS, bytes and files written. The laws are checked:
every phase's peak memory is flat in corpus size but the declared ones (``GROWING``), and the table for a Common
Crawl dump is extrapolated from them (docs/scale.md).

python benchmarks/scale_data.py [--sizes 100000,200000,400000] [--buckets 4] [--phases signatures,candidates,...]
    [--per-file 10000] [--code SRC (another checkout's src/, e.g. to measure main)] [--json PATH] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

PHASES = ("signatures", "candidates", "components", "write")
#: Phases whose memory per task may grow with the corpus, and by what: the one components task holds its nodes.
GROWING = {"components": "nodes (documents with an edge): one task holds them all"}
#: A flat phase's peak may grow this much from the smallest size to the largest (allocator noise, larger batches
#: of the last file, more runs to merge).
FLAT_SLACK = 1.35
WORDS = 60
_SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "an", "el", "or", "us", "ba", "de", "fi", "go"]


def say(message: str) -> None:
    print(f"[scale-data {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make_corpus(root: Path, docs: int, per_file: int, seed: int = 7) -> None:
    """``docs`` JSONL documents of ``WORDS`` made-up words in files of ``per_file``; one in eight a copy of an
    earlier document with one word changed (a near-duplicate at Jaccard ~0.85 of 5-word shingles)."""
    rng = np.random.default_rng(seed)
    vocab = np.array(["".join(rng.choice(_SYLLABLES, size=rng.integers(2, 5))) for _ in range(20_000)])
    words = rng.zipf(1.3, size=(docs, WORDS)) % len(vocab)
    copies = np.flatnonzero(rng.random(docs) < 0.125)
    copies = copies[copies > 0]
    words[copies] = words[rng.integers(0, copies)]
    rows = copies
    words[rows, rng.integers(0, WORDS, size=len(rows))] = rng.integers(0, len(vocab), size=len(rows))
    root.mkdir(parents=True, exist_ok=True)
    for f, start in enumerate(range(0, docs, per_file)):
        with open(root / f"part-{f:05d}.jsonl", "w") as out:
            for i in range(start, min(docs, start + per_file)):
                out.write(json.dumps({"id": f"d{i}", "text": " ".join(vocab[words[i]])}) + "\n")


def workflow(input_dir: str, out: str, buckets: int) -> Any:
    from curator_slurm.stages import JsonlReader, ParquetWriter
    from curator_slurm.workflows.dedup import minhash
    from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates

    return FuzzyDuplicates(JsonlReader(input_dir), ParquetWriter(out), ngram=minhash.FINEWEB_NGRAM,
                           bands=minhash.FINEWEB_BANDS, rows=minhash.FINEWEB_ROWS, buckets=buckets)  # fmt: skip


def child(args: argparse.Namespace) -> int:
    from curator_slurm import LocalExecutor, ShardSpec

    os.environ["CURATOR_PHASE"] = args.phase
    workflow(args.input, args.out, args.buckets).run(LocalExecutor(workers=1), shard=ShardSpec.single())
    # The peak of this process image: VmHWM starts afresh at exec, where ru_maxrss keeps the forking parent's.
    status = Path("/proc/self/status").read_text()
    print(next(line for line in status.splitlines() if line.startswith("VmHWM:")), flush=True)
    return 0


def snapshot(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()} if root.exists() else {}


def run_phase(phase: str, corpus: Path, out: Path, buckets: int, code: str) -> dict[str, Any]:
    """One phase in a child process: its CPU seconds (from wait4), its peak RSS, and what it wrote."""
    before = snapshot(out)
    env = {**os.environ, "PYTHONPATH": code}
    env.pop("CURATOR_PHASE", None)
    cmd = [sys.executable, __file__, "--child", "--phase", phase, "--input", str(corpus), "--out", str(out),
           "--buckets", str(buckets)]  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out_log, tempfile.TemporaryFile() as err_log:
        proc = subprocess.Popen(cmd, env=env, stdout=out_log, stderr=err_log)
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own CPU time (Popen.wait would not give it)
        wall = time.perf_counter() - started
        out_log.seek(0)
        err_log.seek(0)
        stdout, stderr = out_log.read().decode(), err_log.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"phase {phase} failed ({proc.returncode}):\n{stderr[-3000:]}")
    after = snapshot(out)
    new = {p: s for p, s in after.items() if before.get(p) != s and "/runs/" not in p and ".curator-run" not in p}
    return {
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "wall_seconds": round(wall, 2),
        "peak_rss_mib": round(int(stdout.split("VmHWM:")[1].split()[0]) / 1024, 1),
        "bytes": sum(new.values()),
        "files": len(new),
    }


def merge_bound_mib(runs: int) -> float:
    """What the candidates merge may hold: a process's fixed part, the shared read buffers, the blocks of ``runs``."""
    return BASE_MIB + MERGE_MEMORY_MIB + runs * MERGE_BYTES_PER_RUN / 2**20


def laws(report: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per phase, from the smallest and the largest size: CPU seconds per document (the slope), the peak's
    growth, bytes per document, files; and whether the memory law holds: flat, or for the candidates merge
    within its bound for the runs it merged (:func:`merge_bound_mib`), or declared growing (:data:`GROWING`)."""
    sizes = sorted(int(s) for s in report)
    lo, hi = str(sizes[0]), str(sizes[-1])
    span = sizes[-1] - sizes[0]
    out: dict[str, Any] = {}
    for phase in report[hi]:
        a, b = report[lo][phase], report[hi][phase]
        growth = b["peak_rss_mib"] / max(a["peak_rss_mib"], 1.0)
        holds = growth <= FLAT_SLACK or phase in GROWING or len(sizes) == 1
        if phase == "candidates" and "signatures" in report[hi]:
            runs = report[hi]["signatures"]["files"]
            holds = b["peak_rss_mib"] <= merge_bound_mib(runs)
        cpu = (b["cpu_seconds"] - a["cpu_seconds"]) / span if span else b["cpu_seconds"] / sizes[-1]
        out[phase] = {
            "cpu_us_per_doc": round(max(0.0, 1e6 * cpu), 1),
            "peak_growth": round(growth, 2),
            "bytes_per_doc": round(b["bytes"] / sizes[-1], 1),
            "files": b["files"],
            "law_holds": holds,
        }
    return out


#: The dump (docs/scale.md): 90,000 WARC files, 3 billion pages, 10,000 array tasks; the FineWeb recipe's filters
#: let about 19 % of pages reach deduplication (fw3 of docs/performance.md: 215 of 1,118), 600 million documents.
#: FineWeb's documents are longer than the benchmark's (``WORDS``): the text phases' CPU and bytes scale by ``words``.
DUMP = {"source_tasks": 90_000, "array_tasks": 10_000, "documents": 600_000_000, "buckets": 64, "words": 600}
#: The candidates merge's memory per run: an 8 KiB read buffer (at 90,000 runs), up to two 16 KiB blocks decoded, and
#: about a block's rows in a round (sorted: twice); and a process's fixed part.
MERGE_BYTES_PER_RUN = (8 + 16 * 2 + 16 * 2) << 10
BASE_MIB = 150
MERGE_MEMORY_MIB = 64
#: Components: bytes per node at the peak (sorted keys and the node list's merge) and the scratch of one chunk of
#: 2^20 edges (about 150 bytes an edge); nodes (documents with an edge) at most the documents.
COMPONENTS_BYTES_PER_NODE = 24
COMPONENTS_CHUNK_BYTES = 150 << 20
#: Components' time per node: 0.94 and 1.10 us at 3.3 and 13 million nodes (growing like log N; docs/scale.md).
COMPONENTS_US_PER_NODE = 1.2
#: Phases whose CPU time grows with a document's text, not its count of rows; and whose output does.
TEXT_CPU = ("signatures", "write")
TEXT_BYTES = ("write",)


def dump_table(law: dict[str, Any], report: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each phase's tasks, memory per task, CPU hours, bytes and files at the dump, from the measured laws: CPU and
    bytes linear in documents (times the words ratio for the text phases); memory flat (the largest size's peak)
    but the candidates merge (:func:`merge_bound_mib` of one run per source task) and components (bytes per node
    times nodes, at most the documents)."""
    docs, largest = DUMP["documents"], max(report, key=int)
    words = DUMP["words"] / WORDS
    out: dict[str, dict[str, Any]] = {}
    for phase, x in law.items():
        cpu_hours = x["cpu_us_per_doc"] * 1e-6 * docs * (words if phase in TEXT_CPU else 1.0) / 3600
        if phase == "candidates":
            tasks, memory_gb = DUMP["buckets"], merge_bound_mib(DUMP["source_tasks"]) * 2**20 / 1e9
            files = DUMP["buckets"] * max(1, round(x["bytes_per_doc"] * docs / DUMP["buckets"] / 20e6))
        elif phase == "components":
            tasks, files = 1, 1
            memory_gb = (BASE_MIB * 2**20 + COMPONENTS_CHUNK_BYTES + COMPONENTS_BYTES_PER_NODE * docs) / 1e9
            cpu_hours = COMPONENTS_US_PER_NODE * 1e-6 * docs / 3600
        else:
            tasks, files = DUMP["array_tasks"], DUMP["source_tasks"]
            memory_gb = report[largest][phase]["peak_rss_mib"] * 2**20 / 1e9
        out[phase] = {
            "tasks": tasks,
            "memory_per_task_gb": round(memory_gb, 2),
            "cpu_hours": round(cpu_hours, 1),
            "bytes_gb": round(x["bytes_per_doc"] * docs * (words if phase in TEXT_BYTES else 1.0) / 1e9, 1),
            "files": files,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,200000,400000")
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--per-file", type=int, default=10_000)
    parser.add_argument("--code", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--dir", default=os.environ.get("CURATOR_SCALE_DIR", "/tmp/curator-scale-data"))
    parser.add_argument("--keep", action="store_true", help="keep the corpora and outputs")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    root = Path(args.dir)
    phases = args.phases.split(",")
    report: dict[str, dict[str, dict[str, Any]]] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        corpus, out = root / f"corpus-{size}-{args.per_file}", root / f"out-{size}-{args.buckets}"
        if not corpus.exists():
            say(f"making {size} documents")
            make_corpus(corpus, size, args.per_file)
        shutil.rmtree(out, ignore_errors=True)
        report[str(size)] = {}
        for phase in PHASES:  # every phase runs (each needs the one before); the chosen ones are reported
            result = run_phase(phase, corpus, out, args.buckets, args.code)
            if phase in phases:
                report[str(size)][phase] = result
                say(f"{size} documents, {phase}: {result}")
            if phase == phases[-1]:
                break
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    found = laws(report)
    result = {"sizes": report, "laws": found, "dump": dump_table(found, report), "buckets": args.buckets,
              "per_file": args.per_file}  # fmt: skip
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0 if all(law["law_holds"] for law in result["laws"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

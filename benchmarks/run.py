"""The performance record of curator-slurm: ``make bench`` (``python benchmarks/run.py [options]``).

Every row compares two things measured side by side in the same run (interleaved, ``--repeat`` times,
medians), divides them, and checks the ratio against a target. One table is printed at the end, with
the machine it ran on; ``--json PATH`` writes the same numbers (and every sample) for tooling.

Corpora are generated outside the repository, under ``$CURATOR_BENCH_DIR`` (default
``/tmp/curator-bench``), with :func:`curator_slurm.samples.corpus.make_corpus` (seeded, so the same options give
the same bytes on any machine), and reused when already there.

Rows:

1.  LocalExecutor(workers=1) on the demo job (examples/curate.py) vs a plain pyarrow loop doing the
    same per-file work, docs/s.
2.  LocalExecutor(workers=2) vs workers=1, docs/s.
3.  A simulated N-shard array (N processes of examples/curate.py, run one after another) vs one
    unsharded process: total CPU seconds, N = 4 and 16.
4.  An array task that is assigned no work vs ``python -c "import pyarrow.parquet"``: wall seconds.
5.  ``slurm.sharding.select`` per source task vs one ``xxhash.xxh64_intdigest`` call: ns.
6.  Balanced vs hash assignment: max/mean shard weight on lognormal task sizes, N = 16, 100, 1000.
16. `curator-slurm status` on the run directory of 10,000,000 done source tasks (1,000 ledger files), wall s;
16s-16r. The same with the summaries the ledger's writers keep: wall s (target <= 5) and peak RSS (<= 300 MiB).
17. Live progress: the time it takes from the demo job's source tasks (target <= 1 %).
18. `curator-slurm report` on a run of 1,000,000 done source tasks, wall s.
14. An array task with nothing left to do whose shard comes from a 1,000,000-file manifest (1,000
    shards) vs row 4's task listing a 1-file corpus: wall seconds, target <= 2 s (the value is A).
7.  Peak RSS of the demo job on a 10x larger corpus (same file size, more files) vs the base corpus.
t1. The tokenize phase (reader -> MegatronTokenizerWriter, LocalExecutor(workers=1)) vs a bare loop
    (encode_batch + numpy writes of the same .bin/.idx files), tokens/s; one tokenizers thread each.
t1c. Row t1 in tokens per CPU second (user + sys of the whole process).
t2. The same with workers=2 vs workers=1, tokens/s; t2c: in tokens per CPU second (no CPU lost to threads).
t3. Peak RSS of the merge phase (every pair into one file) on a 4x larger corpus vs the base one.
w1a-w1c. WARC -> text (Trafilatura, Resiliparse, jusText) on LocalExecutor(workers=1) vs a bare loop (FastWARC,
    the same library call, JSONL writes), docs/s; w2: examples/extract.py --workers 2 vs 1; w3: Resiliparse vs
    Trafilatura docs/s; w4 (with CURATOR_DATATROVE_PYTHON's venv): datatrove's WarcReader + Trafilatura beside ours;
    w5: examples/extract.py with its per-page time limit vs without one, docs/s.
h1-h24. Each heuristic filter (NeMo Curator's 23 and SymbolRatioFilter): MB/s of its column API vs the
    same filter as a plain Python function per document, on web-like English text, one core.
ft1-ft2. FastTextClassifierFilter and LanguageFilter(backend="fasttext") vs the model called per document
    in a plain loop with the peer's preprocessing and rule: docs/s, one core.
s1. The demo job's reader (JsonlReader, LocalExecutor(workers=1)) over the base corpus in a fresh bucket of the
    local S3 server (scripts/s3-up.sh) vs a bare pyarrow S3 loop (list, open_input_stream, read_json), MB/s;
    s1j: the whole demo job with its input on S3 vs on local disk, docs/s. "not measured" without a server.
s2a-s2b. 100,000 objects on a private seeded moto server, listed by fs.list_tree (s2a) and by
    `curator-slurm plan` (s2b, submit's listing) vs a bare boto3 paginator: seconds, requests in the notes.
d1-d7. Each datatrove-named filter (stages.datatrove) vs datatrove's own filter on the same real texts, CPU
    seconds (datatrove in its own venv, a subprocess; "not measured" without it); its decisions must agree.
fw1. The FineWeb recipe without dedup (examples/fineweb.py --no-dedup --workers 1) vs datatrove's pipeline of the
    same steps with the same trafilatura release, WARC pages/s; the note splits each side's time into
    extraction, filters, reading and writing, and the rest.
fw2. The whole recipe, MinHash dedup included (examples/fineweb.py --workers 1), on 1,118 real pages (a third of each
    of the Debian Handbook's 26 languages, one WARC file) vs datatrove's pipeline of the same steps with its own
    MinHash stages (FineWeb's MinhashConfig: 5-grams, 14 buckets x 8 hashes), same trafilatura, pages/s, target
    >= 1.7; the note splits the time as fw1's does (dedup its own part) and gives each side's CPU seconds.
fw3. fw2's recipe with --extractor resiliparse: pages/s on one worker (one core), reported (B: fw2's own runs).

The code lives in the package ``benchmarks/bench``: ``harness`` (results, the table, child processes and
their rusage, interleaving), ``corpora``, ``demo`` (the demo job and its plain-pyarrow twin), ``context``
(:class:`Bench`, what every row is handed) and ``rows/<family>.py``, one module per family of rows.
Adding a row: write a function ``(Bench) -> list[Row]`` in ``rows/`` and add it to ``rows.GROUPS`` with
the keys it produces. The demo job is run through ``demo.run_demo_job`` with any executor, so a
RayExecutor row is a second executor in ``rows/executor.py``; a ledger row is a group that runs the demo
job twice on one run directory and compares the re-run with a fresh run.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:  # run as a script it is there already; imported by a test it is not
    sys.path.insert(0, HERE)

from bench.main import main  # noqa: E402
from bench.rows import ROW_KEYS  # noqa: E402

__all__ = ["ROW_KEYS", "main"]

if __name__ == "__main__":
    sys.exit(main(description=__doc__))

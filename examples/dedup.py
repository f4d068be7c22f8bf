"""Remove exact (or, with --fuzzy, near-) duplicates from a JSONL corpus across all of it, and write Parquet.

python examples/dedup.py --input data/ --output out/ [--text-field text] [--id-field id] [--identify-only]
python examples/dedup.py --fuzzy --input data/ --output out/ [--bands 20 --rows 8 --ngram 5 | --char-ngrams 24]
    [--jaccard-threshold 0.8 [--jaccard-check exact]]

The same file runs every phase in order on a laptop, and as one array per phase under
`curator-slurm submit examples/dedup.py --shards 8 -- --input data/ --output out/`.
"""

from __future__ import annotations

import argparse
import sys

from curator_slurm import CuratorError, LocalExecutor, PipelineFailedError, configure_logging
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from curator_slurm.workflows.workflow import Workflow


def build_workflow(args: argparse.Namespace) -> Workflow:
    reader = JsonlReader(args.input, files_per_partition=args.files_per_partition)
    if args.fuzzy:
        return FuzzyDuplicates(
            reader=reader,
            writer=ParquetWriter(args.output),
            text_field=args.text_field,
            ngram=args.ngram,
            bands=args.bands,
            rows=args.rows,
            buckets=args.buckets,
            jaccard_threshold=args.jaccard_threshold,
            jaccard_check=args.jaccard_check,
            identify_only=args.identify_only,
            char_ngrams=args.char_ngrams,
            id_field=args.id_field if args.identify_only else None,  # removal needs no ids
        )
    return ExactDuplicates(
        reader=reader,
        writer=ParquetWriter(args.output),
        text_field=args.text_field,
        id_field=args.id_field,
        buckets=args.buckets,
        identify_only=args.identify_only,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, help="directory (or file) of JSONL documents")
    parser.add_argument("--output", required=True, help="directory for the deduplicated Parquet output")
    parser.add_argument("--text-field", default="text")
    parser.add_argument("--id-field", default=None, help="a column to name duplicates by in the list")
    parser.add_argument("--identify-only", action="store_true", help="write the list of duplicates, not the corpus")
    parser.add_argument("--buckets", type=int, default=64, help="shuffle buckets (tasks of the find phase)")
    parser.add_argument("--files-per-partition", type=int, default=1)
    fuzzy = parser.add_argument_group("fuzzy deduplication (MinHash + LSH)")
    fuzzy.add_argument("--fuzzy", action="store_true", help="remove near-duplicates, not only exact copies")
    fuzzy.add_argument("--ngram", type=int, default=5, help="words per shingle (default 5)")
    fuzzy.add_argument(
        "--char-ngrams",
        type=int,
        default=None,
        help="shingles of this many characters of the raw text (NeMo Curator's char_ngrams, e.g. 24) "
        "instead of --ngram words",
    )
    fuzzy.add_argument("--bands", type=int, default=20, help="LSH bands (default 20; FineWeb's: 14)")
    fuzzy.add_argument("--rows", type=int, default=8, help="MinHash values per band (default 8)")
    fuzzy.add_argument(
        "--jaccard-threshold", type=float, default=None, help="drop candidates whose Jaccard similarity is lower"
    )
    fuzzy.add_argument(
        "--jaccard-check",
        choices=["estimate", "exact"],
        default="estimate",
        help="how --jaccard-threshold is checked: estimated from 8-bit signatures (default), or exactly on the "
        "shingle sets (two more phases that re-read the text)",
    )
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all usable CPUs)")
    args = parser.parse_args(argv)

    configure_logging()
    workflow = build_workflow(args)
    try:
        result = workflow.run(LocalExecutor(workers=args.workers))
    except PipelineFailedError as e:
        print(f"dedup: {e}", file=sys.stderr)
        return 1
    except CuratorError as e:  # bad configuration or input, or a phase whose predecessor is not complete
        print(f"dedup: {e}", file=sys.stderr)
        return 2
    if not result.planned:
        print(f"dedup: {result.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

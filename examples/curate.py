"""Curate a JSONL corpus: keep documents of reasonable length and shape, write Parquet.

python examples/curate.py --input data/ --output out/
"""

from __future__ import annotations

import argparse
import sys

from curator_slurm import CuratorError, Pipeline, PipelineFailedError, configure_logging
from curator_slurm.backends import EXECUTORS, make_executor
from curator_slurm.stages import JsonlReader, ParquetWriter, ScoreFilter, SymbolRatioFilter, WordCountFilter


def build_pipeline(input_dir: str, output_dir: str, min_words: int, files_per_partition: int) -> Pipeline:
    return (
        Pipeline("curate")
        .add_stage(JsonlReader(input_dir, files_per_partition=files_per_partition))
        .add_stage(ScoreFilter(WordCountFilter(min_words=min_words), text_field="text", score_field="word_count"))
        .add_stage(ScoreFilter(SymbolRatioFilter(max_symbol_ratio=0.25), text_field="text"))
        .add_stage(ParquetWriter(output_dir))
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, help="directory (or file) of JSONL documents")
    parser.add_argument("--output", required=True, help="directory for the Parquet output")
    parser.add_argument("--executor", choices=EXECUTORS, default="local")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all usable CPUs)")
    parser.add_argument("--min-words", type=int, default=50)
    parser.add_argument("--files-per-partition", type=int, default=1)
    args = parser.parse_args(argv)

    configure_logging()
    try:
        pipeline = build_pipeline(args.input, args.output, args.min_words, args.files_per_partition)
        result = pipeline.run(make_executor(args.executor, workers=args.workers))
    except PipelineFailedError as e:
        print(f"curate: {e}", file=sys.stderr)
        return 1
    except CuratorError as e:  # bad configuration or input, or a missing extra, found before any work
        print(f"curate: {e}", file=sys.stderr)
        return 2
    print(
        f"curate: {len(result.output_files)} files written, {result.rows_in} docs in, {result.rows_out} docs out, "
        f"{result.seconds:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Extract the text of the HTML pages in a directory of WARC files: one output file per source task.

python examples/extract.py --input warcs/ --output text/ [--extractor trafilatura|resiliparse|justext]

Each document keeps ``text``, ``url``, ``warc_record_id``, ``warc_date``, ``content_type``, ``http_status`` and
``warc_offset``. Runs unchanged as a Slurm array (each task extracts its share of the files) and resumes where
a killed run stopped. ``curator-slurm status OUTPUT/.curator-run`` shows why pages were dropped.
"""

from __future__ import annotations

import argparse
import sys

from curator_slurm import CuratorError, LocalExecutor, Pipeline, PipelineFailedError, configure_logging
from curator_slurm.stages import (
    JsonlWriter,
    JusTextExtractor,
    ParquetWriter,
    ResiliparseExtractor,
    TrafilaturaExtractor,
    WarcReader,
)

EXTRACTORS = {"trafilatura": TrafilaturaExtractor, "resiliparse": ResiliparseExtractor, "justext": JusTextExtractor}


def build_pipeline(
    input_dir: str,
    output_dir: str,
    extractor: str = "trafilatura",
    output_format: str = "jsonl",
    blocksize: str | None = None,
    time_limit: float = 5.0,
) -> Pipeline:
    writer = ParquetWriter(output_dir) if output_format == "parquet" else JsonlWriter(output_dir)
    return (
        Pipeline(f"extract-{extractor}")
        .add_stage(WarcReader(input_dir, blocksize=blocksize, split_files=blocksize is not None))
        .add_stage(EXTRACTORS[extractor](time_limit=time_limit or None))
        .add_stage(writer)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, help="directory (or file) of .warc / .warc.gz / .warc.zst files")
    parser.add_argument("--output", required=True, help="directory for the extracted text")
    parser.add_argument("--extractor", choices=sorted(EXTRACTORS), default="trafilatura")
    parser.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all usable CPUs)")
    parser.add_argument("--blocksize", default=None, help="cut large WARC files into pieces of this size (e.g. 256MiB)")
    parser.add_argument("--time-limit", type=float, default=5.0, help="seconds per page before it is dropped (0: none)")
    args = parser.parse_args(argv)

    configure_logging()
    try:
        pipeline = build_pipeline(args.input, args.output, args.extractor, args.format, args.blocksize, args.time_limit)
        result = pipeline.run(LocalExecutor(workers=args.workers))
    except PipelineFailedError as e:
        print(f"extract: {e}", file=sys.stderr)
        return 1
    except CuratorError as e:  # bad configuration or input (a missing extra), found before any work was done
        print(f"extract: {e}", file=sys.stderr)
        return 2
    print(
        f"extract: {len(result.output_files)} files written, {result.rows_in} pages in, {result.rows_out} documents "
        f"out, {result.seconds:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

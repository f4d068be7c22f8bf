"""A script of two pipelines and glue, as users write them (issue #24.5): each pipeline filters its own
input into its own output; the glue, guarded by ``curator_slurm.is_driver()``, reads both outputs and
appends one line (the row counts) to ``<output>/report.txt``, so a test can count how often it ran.

    python tests/pipelines/two_plus_glue.py --input-a A --input-b B --output OUT
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

import pyarrow.parquet as pq

import curator_slurm
from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError, configure_logging
from curator_slurm.stages import JsonlReader, ParquetWriter, ScoreFilter, WordCountFilter


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input-a", required=True)
    parser.add_argument("--input-b", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    configure_logging()
    a = Pipeline("a").add_stage(JsonlReader(args.input_a)).add_stage(ScoreFilter(WordCountFilter(min_words=50)))
    b = Pipeline("b").add_stage(JsonlReader(args.input_b)).add_stage(ScoreFilter(WordCountFilter(min_words=80)))
    try:
        a.add_stage(ParquetWriter(os.path.join(args.output, "a"))).run(LocalExecutor(workers=1))
        b.add_stage(ParquetWriter(os.path.join(args.output, "b"))).run(LocalExecutor(workers=1))
    except PipelineFailedError as e:
        print(f"two_plus_glue: {e}", file=sys.stderr)
        return 1
    if curator_slurm.is_driver():  # the glue: once, after both pipelines, with all of their outputs
        counts = [
            sum(pq.read_metadata(f).num_rows for f in glob.glob(os.path.join(args.output, name, "*.parquet")))
            for name in ("a", "b")
        ]
        if not all(counts):
            raise RuntimeError(f"glue ran before the pipelines' outputs were complete: {counts}")
        fd = os.open(os.path.join(args.output, "report.txt"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"{counts[0]} {counts[1]}\n".encode())
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())

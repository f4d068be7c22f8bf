"""A test pipeline with a slow stage: JSONL read in batches of ``--batch-rows`` documents, each batch held
``--sleep`` seconds by a stage, then written as Parquet. A large source task then runs long and advances a
batch at a time, so tests can watch it (`curator-slurm status`) and kill it midway.

    python tests/pipelines/slow.py --input IN --output OUT [--sleep S] [--batch-rows N] [--workers N]
"""

from __future__ import annotations

import argparse
import sys
import time

from curator_slurm import CuratorError, LocalExecutor, Pipeline, configure_logging
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage
from curator_slurm.tasks import DocumentBatch


class Slow(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Holds every batch ``sleep`` seconds (a stand-in for a costly extractor or classifier)."""

    name = "slow_stage"

    def __init__(self, sleep: float) -> None:
        self.sleep = sleep

    def process(self, task: DocumentBatch) -> DocumentBatch:
        time.sleep(self.sleep)
        return task


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--batch-rows", type=int, default=None)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    configure_logging()
    pipeline = (
        Pipeline("slow")
        .add_stage(JsonlReader(args.input, files_per_partition=1, batch_rows=args.batch_rows))
        .add_stage(Slow(args.sleep))
        .add_stage(ParquetWriter(args.output))
    )
    try:
        result = pipeline.run(LocalExecutor(workers=args.workers, retry_backoff=0.01))
    except CuratorError as e:
        print(f"slow: {e}", file=sys.stderr)
        return 1
    print(f"slow: {result.done} done, {result.source_tasks_skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

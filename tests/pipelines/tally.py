"""A test pipeline: the demo job plus a stage that records each source task it processes.

Every processed source task appends its id to ``--tally`` (O_APPEND, so concurrent processes do
not interleave lines) and sleeps ``--sleep`` seconds, so tests can count work and kill runs midway.

    python tests/pipelines/tally.py --input IN --output OUT --tally FILE [--sleep S] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from curator_slurm import CuratorError, LocalExecutor, Pipeline, PipelineFailedError, configure_logging
from curator_slurm.stages import (
    JsonlReader,
    ParquetReader,
    ParquetWriter,
    ProcessingStage,
    ScoreFilter,
    WordCountFilter,
)
from curator_slurm.tasks import DocumentBatch


class Tally(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Appends the source id of every batch to a file, then sleeps."""

    def __init__(self, path: str, sleep: float) -> None:
        self.path = path
        self.sleep = sleep

    def params(self) -> dict[str, object]:
        return {}  # where we count is not part of what the pipeline computes

    def process(self, task: DocumentBatch) -> DocumentBatch:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{task.source_id}\n".encode())
        finally:
            os.close(fd)
        time.sleep(self.sleep)
        return task


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--tally", required=True)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--parquet", action="store_true", help="read Parquet instead of JSONL")
    parser.add_argument("--start-method", default=None, help="how LocalExecutor starts its workers")
    args = parser.parse_args()
    configure_logging()
    reader = ParquetReader(args.input) if args.parquet else JsonlReader(args.input)
    pipeline = (
        Pipeline("tally")
        .add_stage(reader)
        .add_stage(Tally(args.tally, args.sleep))
        .add_stage(ScoreFilter(WordCountFilter(min_words=50)))
        .add_stage(ParquetWriter(args.output))
    )
    try:
        executor = LocalExecutor(workers=args.workers, retry_backoff=0.01, start_method=args.start_method)
        result = pipeline.run(executor)
    except PipelineFailedError as e:
        print(f"tally: {e}", file=sys.stderr)
        return 1
    except CuratorError as e:
        print(f"tally: {e}", file=sys.stderr)
        return 2
    print(f"tally: {result.done} done, {result.source_tasks_skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A test pipeline: the demo job plus a stage that records each source task it processes.

Every processed source task appends its id to ``--tally`` (O_APPEND, so concurrent processes do
not interleave lines) and sleeps ``--sleep`` seconds, so tests can count work and kill runs midway.

    python tests/pipelines/tally.py --input IN --output OUT --tally FILE [--sleep S] [--workers N]
        [--skew LIGHT HEAVY SHARDS [--started FILE]]

``--skew``: after the tally, each source task stalls LIGHT seconds, or HEAVY when it belongs to shard 0 of
SHARDS under the hash strategy (a straggler); ``--started`` then gets ``<pid> <source id>`` per task started.
"""

from __future__ import annotations

import argparse
import os
import sys

from curator_slurm import CuratorError, LocalExecutor, Pipeline, PipelineFailedError, configure_logging
from curator_slurm.stages import (
    JsonlReader,
    ParquetReader,
    ParquetWriter,
    ScoreFilter,
    WordCountFilter,
)

# tests/ holds the Tally stage, shared with in-process tests; a run as a script sees only this directory.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from support.shared_stages import Skew, Tally


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--tally", required=True)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--parquet", action="store_true", help="read Parquet instead of JSONL")
    parser.add_argument("--start-method", default=None, help="how LocalExecutor starts its workers")
    parser.add_argument("--skew", nargs=3, type=float, metavar=("LIGHT", "HEAVY", "SHARDS"))
    parser.add_argument("--started", default=None)
    args = parser.parse_args()
    configure_logging()
    reader = ParquetReader(args.input) if args.parquet else JsonlReader(args.input)
    pipeline = Pipeline("tally").add_stage(reader).add_stage(Tally(args.tally, hold=args.sleep))
    if args.skew:
        light, heavy, shards = args.skew
        pipeline.add_stage(Skew(light, heavy, int(shards), started=args.started))
    pipeline.add_stage(ScoreFilter(WordCountFilter(min_words=50))).add_stage(ParquetWriter(args.output))
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

"""A test workflow: exact deduplication (hash -> find -> write) with the tally pipeline's skew in every phase, so
that in each phase the source tasks of shard 0 of 4 (hash) are the slow ones.

    python tests/pipelines/skewed_dedup.py --input IN --output OUT --skew LIGHT HEAVY [--buckets B]
"""

from __future__ import annotations

import argparse
import os
import sys

from curator_slurm import LocalExecutor, PipelineFailedError, configure_logging
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.workflows.dedup.exact import ExactDuplicates

sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from support.shared_stages import Skew

#: Where the skew goes in each phase: after the stages that must see a source task's rows first.
AFTER = {"hash": 1, "find": 2, "write": 2}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--skew", nargs=2, type=float, metavar=("LIGHT", "HEAVY"), required=True)
    parser.add_argument("--buckets", type=int, default=8)
    args = parser.parse_args()
    configure_logging()
    workflow = ExactDuplicates(JsonlReader(args.input), ParquetWriter(args.output), buckets=args.buckets)
    for phase in workflow.phases:
        phase.pipeline.stages.insert(AFTER[phase.name], Skew(args.skew[0], args.skew[1], 4))
    try:
        workflow.run(LocalExecutor(workers=1))
    except PipelineFailedError as e:
        print(f"skewed_dedup: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

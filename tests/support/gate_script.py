"""A pipeline script whose documents wait at a gate: the source tasks of the files named ``wait*`` block until
the file ``--gate`` exists, so a test holds the process at a known point (working, its marker written)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from curator_slurm import CuratorError, Pipeline, configure_logging
from curator_slurm.backends import make_executor
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.stages.filters.base import DocumentFilter


class Gate(DocumentFilter):
    """Keeps every document; a document whose text starts with ``WAIT`` waits for the file ``gate``."""

    def __init__(self, gate: str) -> None:
        super().__init__()
        self.gate = gate

    def score_document(self, text: str) -> float:
        while text.startswith("WAIT") and not os.path.exists(self.gate):
            time.sleep(0.02)
        return 1.0

    def keep_document(self, score: float) -> bool:
        return True


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--gate", required=True)
    args = parser.parse_args()
    configure_logging()
    pipeline = Pipeline("gate").add_stage(JsonlReader(args.input)).add_stage(Gate(args.gate))
    try:
        pipeline.add_stage(ParquetWriter(args.output)).run(make_executor("local", workers=1))
    except CuratorError as e:
        print(f"gate: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

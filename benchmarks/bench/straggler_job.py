"""The demo job (examples/curate.py) with slow pages in one shard, for rows st1-st2: the source tasks that hash to
shard 0 of SHARDS stall SECONDS for each document they read (as pages that are slow to extract would), the others
not at all. Run as the script of a `curator-slurm local` array.

python straggler_job.py INPUT OUTPUT SECONDS SHARDS
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

from curator_slurm import LocalExecutor, configure_logging
from curator_slurm.runs.sharding import shard_of
from curator_slurm.stages import ProcessingStage
from curator_slurm.tasks import DocumentBatch

CURATE = Path(__file__).resolve().parents[2] / "examples" / "curate.py"


class SlowPages(ProcessingStage[DocumentBatch, DocumentBatch]):
    """``seconds`` per document of the source tasks that hash to shard 0 of ``shards``."""

    name = "slow_pages"

    def __init__(self, seconds: float, shards: int) -> None:
        self.seconds, self.shards = seconds, shards

    def params(self) -> dict[str, object]:
        return {}  # how slow does not change what it computes

    def process(self, task: DocumentBatch) -> DocumentBatch:
        if self.seconds and shard_of(str(task.source_id), self.shards) == 0:
            time.sleep(self.seconds * task.num_items)
        return task


def main() -> None:
    inp, out, seconds, shards = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    spec = importlib.util.spec_from_file_location("curate_example", CURATE)
    assert spec is not None and spec.loader is not None
    curate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(curate)
    pipeline = curate.build_pipeline(inp, out, 50, 1)
    pipeline.stages.insert(1, SlowPages(seconds, shards))
    configure_logging("WARNING")
    pipeline.run(LocalExecutor(workers=1))


if __name__ == "__main__":
    main()

"""The WARC -> text job through datatrove (``WarcReader`` + ``Trafilatura`` + ``JsonlWriter``), for row w4: run
with the Python of a venv that has datatrove (never imported by the bench itself, which has none).

python datatrove_job.py INPUT_DIR OUTPUT_DIR TIME_LIMIT   -> prints {"docs": N, "seconds": S} (the run only)
"""

from __future__ import annotations

import json
import os
import sys
import time

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.extractors import Trafilatura
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.writers import JsonlWriter


def main() -> None:
    source, out, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
    files = len([p for p in os.listdir(source) if p.endswith(".warc.gz")])
    executor = LocalPipelineExecutor(
        pipeline=[
            WarcReader(source, glob_pattern="*.warc.gz"),
            Trafilatura(favour_precision=True, timeout=limit),
            JsonlWriter(out, compression=None),
        ],
        tasks=files,
        workers=1,
        logging_dir=out + "-logs",
    )
    start = time.perf_counter()
    executor.run()
    seconds = time.perf_counter() - start
    docs = 0
    for name in os.listdir(out):
        with open(f"{out}/{name}") as f:
            docs += sum(1 for _ in f)
    print(json.dumps({"docs": docs, "seconds": seconds}))


if __name__ == "__main__":
    main()

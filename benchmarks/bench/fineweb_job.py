"""The FineWeb recipe without dedup through ``examples/fineweb.py``'s own workflow, for row fw1: run as a child
(a fresh interpreter, as a user's run starts), with the script's arguments after the output directory.

python fineweb_job.py OUTPUT_DIR ARGS...   -> prints {"pages", "docs", "urls", "seconds", "stages"} (the run only)

``seconds`` is the workflow's run as it times itself (interpreter start and imports left out, as the datatrove
side leaves out its own); ``stages`` is each stage's seconds (``phase/stage``) as the adapter timed it; ``urls``
a digest of the written documents' sorted URLs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

from curator_slurm import LocalExecutor, configure_logging

FINEWEB = Path(__file__).resolve().parents[2] / "examples" / "fineweb.py"


def main() -> None:
    out, argv = sys.argv[1], sys.argv[2:]
    spec = importlib.util.spec_from_file_location("fineweb_example", FINEWEB)
    assert spec is not None and spec.loader is not None
    fineweb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fineweb)
    args = fineweb.parse_args(["--output", out, "--no-dedup", "--workers", "1", *argv])
    configure_logging("WARNING")
    result = fineweb.build_workflow(args).run(LocalExecutor(workers=1))
    stages = {f"{phase}/{s.name}": round(s.seconds, 4) for phase, r in result.phases.items() for s in r.stages[1:]}
    base = result.phases["base"]
    pages = base.stages[1].rows_out  # the reader's documents: the WARC's HTML pages
    docs = result.phases["pii"].rows_out
    urls = sorted(json.loads(line)["url"] for p in sorted(Path(out).glob("*.jsonl")) for line in p.open())
    digest = hashlib.sha1("\n".join(urls).encode()).hexdigest()  # which documents: the other side's must match
    print(json.dumps({"pages": pages, "docs": docs, "urls": digest, "seconds": result.seconds, "stages": stages}))


if __name__ == "__main__":
    main()

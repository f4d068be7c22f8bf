"""The FineWeb recipe through ``examples/fineweb.py``'s own workflow, for rows fw1-fw3: run as a child (a fresh
interpreter, as a user's run starts), with the script's arguments after the output directory; without dedup
(``--no-dedup``, row fw1) unless ``--dedup`` comes first (rows fw2, fw3).

python fineweb_job.py OUTPUT_DIR [--dedup] ARGS...
    -> prints {"pages", "docs", "urls", "survivors", "base_docs", "base_urls", "seconds", "stages"} (the run only)

``seconds`` is the workflow's run as it times itself (interpreter start and imports left out, as the datatrove
side leaves out its own); ``stages`` is each stage's seconds (``phase/stage``) as the adapter timed it;
``survivors`` the written documents' sorted URLs and ``urls`` their digest, ``base_urls`` the digest of what
the ``base`` phase kept (before dedup).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

from curator_slurm import LocalExecutor, configure_logging

FINEWEB = Path(__file__).resolve().parents[2] / "examples" / "fineweb.py"


def sorted_urls(paths: list[Path]) -> list[str]:
    return sorted(json.loads(line)["url"] for p in sorted(paths) for line in p.open())


def url_digest(urls: list[str]) -> str:
    """Which documents: the other side's must match (sorted URLs, hashed)."""
    return hashlib.sha1("\n".join(urls).encode()).hexdigest()


def main() -> None:
    out, argv = sys.argv[1], sys.argv[2:]
    dedup = argv[:1] == ["--dedup"]
    argv = argv[1:] if dedup else ["--no-dedup", *argv]
    spec = importlib.util.spec_from_file_location("fineweb_example", FINEWEB)
    assert spec is not None and spec.loader is not None
    fineweb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fineweb)
    args = fineweb.parse_args(["--output", out, "--workers", "1", *argv])
    configure_logging("WARNING")
    result = fineweb.build_workflow(args).run(LocalExecutor(workers=1))
    stages = {f"{phase}/{s.name}": round(s.seconds, 4) for phase, r in result.phases.items() for s in r.stages[1:]}
    base = result.phases["base"]
    pages = base.stages[1].rows_out  # the reader's documents: the WARC's HTML pages
    docs = result.phases["pii"].rows_out
    kept = sorted_urls(list((Path(out) / ".curator-work" / "base").rglob("*.jsonl")))
    written = sorted_urls(list(Path(out).glob("*.jsonl")))
    print(json.dumps({"pages": pages, "docs": docs, "urls": url_digest(written), "survivors": written,
                      "base_docs": base.rows_out, "base_urls": url_digest(kept), "seconds": result.seconds,
                      "stages": stages}))  # fmt: skip


if __name__ == "__main__":
    main()

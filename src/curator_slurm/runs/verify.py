"""Whether what the ledger says was written is still there (issue #24.7): `status --verify` checks that the
outputs of every done source task exist with the sizes recorded, and a re-run (or `retry`) does a source
task again whose outputs are gone, instead of skipping it as done.

A done record keeps ``written``: the absolute path and size of each output, taken as the task was
recorded (after its files were published). Records written before it was kept cannot be checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from curator_slurm.runs.inputs import done_records, stat_files


def written_files(outputs: Iterable[str]) -> dict[str, list[Any]]:
    """What a done record keeps of ``outputs`` (the local ones): absolute paths, sizes and times now."""
    stats = stat_files(os.path.abspath(p) for p in outputs if "://" not in p)
    return {"paths": list(stats), "sizes": [s for s, _ in stats.values()], "mtimes": [m for _, m in stats.values()]}


def lost_outputs(run_dir: str, sources: set[str] | None = None, shard: Any = None) -> dict[str, list[str]]:
    """For each done source task of ``run_dir`` (of ``sources``, default all; with ``shard``, read from its
    ledger files only) whose recorded outputs are gone or have another size now: what is wrong with each,
    naming the file."""
    problems: dict[str, list[str]] = {}
    for source, record in done_records(run_dir, sources, shard).items():
        written = record.get("written") or {}
        for path, size in zip(written.get("paths") or [], written.get("sizes") or [], strict=False):
            try:
                now = os.path.getsize(path)
            except OSError:
                problems.setdefault(source, []).append(f"{path}: missing")
                continue
            if now != size:
                problems.setdefault(source, []).append(f"{path}: is {now} bytes, was {size} when recorded")
    return problems


def verify_run(run_dir: str) -> dict[str, Any]:
    """What `status --verify` adds: the done source tasks whose outputs are lost (``lost_outputs``: source
    → problems) and the inputs that changed since the done tasks read them (``changed_inputs``)."""
    from curator_slurm.runs.inputs import changes, recorded_inputs

    recorded = recorded_inputs(run_dir)
    return {"lost_outputs": lost_outputs(run_dir), "changed_inputs": changes(recorded, stat_files(recorded))}


__all__ = ["lost_outputs", "verify_run", "written_files"]

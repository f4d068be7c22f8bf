"""Which done source tasks a start does again, and what it refuses to start among: the checks a run session
makes of its ledger's records (lost outputs, earlier phases recorded again, moved positions) and its output."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from curator_slurm import fs
from curator_slurm.errors import RunDirError
from curator_slurm.runs.inputs import position_base
from curator_slurm.runs.layout import RUN_FILE
from curator_slurm.runs.upstream import Upstream
from curator_slurm.tasks import Task

Records = Mapping[str, Mapping[str, Any]]


def lost(records: Records, label: str, log: Any) -> set[str]:
    """The done tasks among ``records`` whose outputs are gone or resized (said in the log)."""
    from curator_slurm.runs.verify import lost_of

    found = lost_of(records)
    if found:
        first = "; ".join(problems[0] for problems in list(found.values())[:3])
        log.warning(f"{label}: doing {len(found)} done source task(s) again, their outputs are gone: {first}")
    return set(found)


def stale(upstreams: Sequence[Upstream], records: Records, label: str, log: Any) -> set[str]:
    """The done tasks whose recorded ``upstream`` digest is not what they would read now: an earlier phase
    recorded its outputs again since (a task redone, inputs added)."""
    from curator_slurm.runs.upstream import stale as stale_of

    found = stale_of(upstreams, records)
    if found:
        names = ", ".join(repr(u.name) for u in upstreams)
        log.warning(
            f"{label}: doing {len(found)} done source task(s) again: what they read of phase {names} was recorded "
            "again since they were done"
        )
    return found


def moved(records: Records, tasks: Sequence[Task], label: str, log: Any) -> set[str]:
    """The done tasks whose documents' positions moved since they were done: their files' places in the sorted
    listing of all inputs changed (a file accepted before them), so what they wrote under the old positions
    (dedup keys, ids) would not match what later tasks compute now."""
    found = {
        t.task_id
        for t in tasks
        if t.task_id in records
        and records[t.task_id].get("positions") is not None
        and records[t.task_id]["positions"] != position_base(t)
    }
    if found:
        log.warning(
            f"{label}: doing {len(found)} done source task(s) again: the listing of the inputs changed, so their "
            "documents' positions moved"
        )
    return found


def check_upstreams(upstreams: Sequence[Upstream], who: str) -> None:
    """Refuse to start when an output an earlier phase recorded (and this one reads) is gone or changed."""
    from curator_slurm.runs.upstream import check

    roots = sorted({os.path.dirname(u.run_dir) for u in upstreams})
    check(
        upstreams,
        who,
        "Run the script again (the earlier phase does again the source tasks whose outputs are gone, and the "
        f"phases after it follow), or for a submitted run `curator-slurm retry {' '.join(roots)}` (it starts from "
        "the earliest phase with lost outputs).",
    )


def refuse_unaccounted_outputs(
    run_dir: str, existing_outputs: Callable[[], list[str]] | None, clear: bool, log: Any
) -> None:
    """A run starting afresh (no ``run.json`` yet) in an output that holds files its sink could have written
    would mix them with its own (rows twice after another partitioning, stale token parts): refuse, naming
    them, or delete them with ``clear`` (``CURATOR_CLEAR_OUTPUT=1``)."""
    run_file = os.path.join(run_dir, RUN_FILE)
    if existing_outputs is None or os.path.exists(run_file):
        return
    found = existing_outputs()
    if not found or os.path.exists(run_file):  # listed, then claimed by another process of this run: its own
        return
    if clear:
        for path in found:
            fs.remove(path)
        log.warning(f"CURATOR_CLEAR_OUTPUT=1: deleted {len(found)} earlier output file(s), e.g. {found[0]}")
        return
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    raise RunDirError(
        f"{len(found)} file(s) in the output are no run's that {run_dir} records: {', '.join(found[:3])}{more}. A "
        "run starting afresh there would mix them with its own outputs (documents twice, stale parts). Delete "
        "them, write to another output directory, or set CURATOR_CLEAR_OUTPUT=1 to have this run delete them first."
    )


__all__ = ["check_upstreams", "lost", "moved", "refuse_unaccounted_outputs", "stale"]

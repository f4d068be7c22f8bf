"""Scripts that run several pipelines (or workflows), each run call a numbered step, and glue code guarded by
:func:`is_driver`. Design: docs/design.md, "Steps and glue"."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager

#: The plan line that says the script guards glue with ``is_driver()`` (so `local`/`submit` run it once).
GLUE_LINE = {"kind": "glue"}

_calls = 0
_nested = 0


def next_step() -> int | None:
    """The number of this run call among the script's steps (0, 1, ...), or None for a run that a
    workflow makes for one of its phases (part of the workflow's step, not a step of its own)."""
    global _calls
    if _nested:
        return None
    index, _calls = _calls, _calls + 1
    return index


@contextmanager
def inside_step() -> Iterator[None]:
    """While a workflow runs its phases: their pipeline runs are not steps of the script."""
    global _nested
    _nested += 1
    try:
        yield
    finally:
        _nested -= 1


def not_my_step(index: int | None, wanted: int | None) -> bool:
    """Whether a run call numbered ``index`` is another step than the one this array task runs
    (``CURATOR_PIPELINE``, ``wanted``): it then returns at once without doing anything."""
    return index is not None and wanted is not None and index != wanted


def is_driver() -> bool:
    """Whether this process should run a script's glue: False while `curator-slurm plan`/`submit`/`local`
    lists the work (plan mode; the script is then noted as having glue, so that they run it once after
    every step), in an array task or `local` shard of a step, and in any sharded process; True in a plain
    run of the script, where every run call has done (or found done) all of its work::

        result = pipeline.run()
        if curator_slurm.is_driver():
            merge(result.output_files)
    """
    from curator_slurm.settings import RunOptions
    from curator_slurm.shard import ShardSpec

    options = RunOptions.from_env()
    if options.plan_out:
        _note_glue(options.plan_out)
        return False
    if options.pipeline is not None or options.phase is not None:
        return False
    return not ShardSpec.from_env().enabled


def _note_glue(plan_out: str) -> None:
    """Add the glue line to the plan file (once), beside the run calls' lines."""
    if os.path.exists(plan_out):
        with open(plan_out, encoding="utf-8") as f:
            if any('"kind": "glue"' in line for line in f):
                return
    with open(plan_out, "a", encoding="utf-8") as f:
        f.write(json.dumps(GLUE_LINE) + "\n")


__all__ = ["GLUE_LINE", "inside_step", "is_driver", "next_step", "not_my_step"]

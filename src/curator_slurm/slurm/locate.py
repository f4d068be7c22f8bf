"""Which run directory a user means: the one named, or the run directory of the output (or workflow output) a
user named, local or on object storage, where a run puts it by default."""

from __future__ import annotations

import os

from curator_slurm import fs
from curator_slurm.runs.layout import DEFAULT_WORK_DIR_NAME, WORKFLOW_FILE
from curator_slurm.runs.ledger import LEDGER_DIR
from curator_slurm.runs.plan import PLAN_FILE
from curator_slurm.runs.rundir import RUN_FILE, SOURCES_FILE, default_run_dir_of
from curator_slurm.slurm.submit import SUBMISSIONS_FILE

#: What a run directory holds (any of them): a workflow's run root holds ``workflow.json``.
MARKERS = (RUN_FILE, SOURCES_FILE, LEDGER_DIR, PLAN_FILE, SUBMISSIONS_FILE, WORKFLOW_FILE)


def is_run_dir(path: str) -> bool:
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, m)) for m in MARKERS)


def candidates(path: str) -> list[str]:
    """Where the run directory of ``path`` may be, in order: ``path`` itself (not for a URI), the default run
    directory of an output ``path`` (``OUT/.curator-run``; for ``s3://b/out``, ``./.curator-run/s3/b/out``),
    then that of a workflow writing into ``path`` (its work directory ``OUT/.curator-work``)."""
    found = [] if fs.is_uri(path) else [path]
    found.append(default_run_dir_of(path))
    found.append(default_run_dir_of(fs.join(path, DEFAULT_WORK_DIR_NAME)))
    return found


def locate_run_dir(path: str) -> str:
    """The run directory ``path`` means (see :func:`candidates`); ``path`` as it is when none of them is one
    (the command then says what is wrong with it)."""
    for candidate in candidates(path):
        if is_run_dir(candidate):
            return candidate
    return path if not fs.is_uri(path) else default_run_dir_of(path)


__all__ = ["DEFAULT_WORK_DIR_NAME", "candidates", "is_run_dir", "locate_run_dir"]

"""Talking to Slurm's controller: the state of a run's array tasks (squeue). Requeueing a job from inside
it (scontrol) is part of a run's stop policy: :func:`curator_slurm.runs.signals.requeue`."""

from __future__ import annotations

import logging
from collections.abc import Sequence

logger = logging.getLogger(__name__)


#: Array task states in which the task may still do work.
ACTIVE_STATES = frozenset(
    {"RUNNING", "PENDING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",
     "SIGNALING", "STAGE_OUT", "SUSPENDED", "STOPPED"}
)  # fmt: skip
#: Array task states of a task that ended without completing (its shard's unrecorded work is not done).
ENDED_BADLY_STATES = frozenset(
    {"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED",
     "REVOKED", "SPECIAL_EXIT"}
)  # fmt: skip


def job_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """State of every task of ``job_ids`` that Slurm still knows (``123_4`` → RUNNING, FAILED, ...), ended
    ones included (``squeue -t all``: they stay known for ``MinJobAge`` seconds); None without Slurm.

    A job Slurm has forgotten is left out. When squeue refuses the whole list because some ids are
    forgotten, each id is asked on its own, so the ones still known are not lost with them.
    """
    import shutil  # here, not at the top (see requeue)

    if not job_ids or shutil.which("squeue") is None:
        return None
    stdout, stderr, ok = _squeue(job_ids)
    if not ok:
        if "Invalid job id" not in stderr:
            return None
        if len(job_ids) == 1:
            return {}  # older than MinJobAge: forgotten, so neither queued nor running
        states: dict[str, str] = {}
        for job in job_ids:
            one = job_states([job])
            if one is None:
                return None
            states.update(one)
        return states
    states = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def _squeue(job_ids: Sequence[str]) -> tuple[str, str, bool]:
    import subprocess

    proc = subprocess.run(
        ["squeue", "-h", "-r", "-t", "all", "-j", ",".join(job_ids), "-o", "%i %T"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.stdout, proc.stderr, proc.returncode == 0


def active_jobs(job_ids: Sequence[str]) -> list[str]:
    """The array tasks of ``job_ids`` that are queued or running (may still do work), sorted; none when
    Slurm cannot be asked."""
    return sorted(j for j, state in (job_states(job_ids) or {}).items() if state in ACTIVE_STATES)

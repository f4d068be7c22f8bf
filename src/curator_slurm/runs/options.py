"""How a run records progress and reacts to preemption: a value, not Slurm-specific.

The values come from ``CURATOR_*`` variables, read in the one module that reads the environment
(:func:`curator_slurm.slurm.env.run_options`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RunOptions:
    """How a run records its progress and reacts to preemption (defaults for ``Pipeline.run``).

    ``run_dir``: ``CURATOR_RUN_DIR``; ``accept_new_inputs``: ``CURATOR_ACCEPT_NEW_INPUTS=1`` lets a shard
    go on when the inputs changed since the run started; ``requeue``: ``CURATOR_REQUEUE=1`` asks Slurm to
    requeue the job after a stop signal; ``grace_seconds``: ``CURATOR_GRACE_SECONDS``, how long in-flight
    source tasks may finish after SIGTERM/SIGUSR1/SIGUSR2 (default 25, below Slurm's default KillWait of 30).
    """

    run_dir: str | None = None
    accept_new_inputs: bool = False
    requeue: bool = False
    grace_seconds: float = 25.0
    #: ``CURATOR_PLAN_OUT``: set by ``curator-slurm plan/submit``; the run lists its source tasks into
    #: this JSON file and exits without processing anything.
    plan_out: str | None = None
    #: ``CURATOR_PHASE``: set in the array tasks that `curator-slurm submit` starts for one phase of a
    #: workflow; ``Workflow.run`` then runs that phase's shard only.
    phase: str | None = None
    #: ``CURATOR_PIPELINE``: set by `curator-slurm local/submit` in the tasks of one step of a script that
    #: runs several pipelines or workflows (:mod:`curator_slurm.steps`): only that run call does its work.
    pipeline: int | None = None
    #: ``CURATOR_LEDGER_WINDOW``: the ledger commits (makes outputs durable, then appends records with one
    #: fsync) every this many source tasks at most; 1 commits each on its own. A crash loses at most one
    #: window, whose tasks a resume does again.
    ledger_window: int = 1000
    #: ``CURATOR_LEDGER_WINDOW_SECONDS``: ... or once the window's first record is this old, or its tasks
    #: ran this long in all (so a crash costs at most about this much work, redone on resume).
    ledger_window_seconds: float = 0.5

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunOptions:
        """The options the ``CURATOR_*`` variables of ``environ`` (default: this process's) set."""
        from curator_slurm.slurm.env import run_options

        return run_options(environ)


__all__ = ["RunOptions"]

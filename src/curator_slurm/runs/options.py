"""How a run records progress and reacts to preemption: :class:`RunOptions`, defined with the other settings in
:mod:`curator_slurm.settings` and re-exported here."""

from __future__ import annotations

from curator_slurm.settings import RunOptions

__all__ = ["RunOptions"]

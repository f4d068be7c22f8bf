"""How a run records progress and reacts to preemption: :class:`RunOptions`, a value, not Slurm-specific.

It is defined with the other ``CURATOR_*`` settings in :mod:`curator_slurm.settings` (the one module that
reads the environment) and re-exported here, where the run directory's code looks for it.
"""

from __future__ import annotations

from curator_slurm.settings import RunOptions

__all__ = ["RunOptions"]

"""Executors. ``RayExecutor`` lives in ``curator_slurm.backends.ray`` and imports Ray lazily;
:func:`make_executor` picks one by name, so a script offers ``--executor local|ray`` in one line."""

from curator_slurm.backends.adapter import BaseStageAdapter
from curator_slurm.backends.local import LocalExecutor
from curator_slurm.backends.run import BaseExecutor
from curator_slurm.runs.results import PipelineResult

#: The executors :func:`make_executor` knows, by name.
EXECUTORS = ("local", "ray")


def make_executor(name: str = "local", workers: int | None = None) -> BaseExecutor:
    """The executor called ``name``: ``"local"``, a :class:`LocalExecutor` with ``workers`` processes (default:
    the CPUs this process may use), or ``"ray"``, a ``RayExecutor`` (Ray is imported only then; without the
    ``[ray]`` extra this fails at once with the pip command) whose local Ray gets ``workers`` CPUs."""
    if name == "local":
        return LocalExecutor(workers=workers)
    if name == "ray":
        from curator_slurm.backends.ray import RayExecutor

        return RayExecutor(num_cpus=workers)
    raise ValueError(f"executor {name!r}: use one of {', '.join(EXECUTORS)}")


__all__ = ["EXECUTORS", "BaseExecutor", "BaseStageAdapter", "LocalExecutor", "PipelineResult", "make_executor"]

"""Which slice of the work this process owns, and which job it belongs to: frozen values, passed explicitly from the
driver, resolved from a mapping by :mod:`curator_slurm.settings`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from curator_slurm.errors import ShardConfigError
from curator_slurm.settings import STRATEGIES, job_fields, shard_fields


def host_name() -> str:
    """This machine's name, as ``socket.gethostname()`` gives it, without importing socket in every task."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


@dataclass(frozen=True)
class JobInfo:
    """Which Slurm job (if any) this process belongs to; recorded with every ledger record."""

    job_id: str | None = None
    array_job_id: str | None = None
    array_task_id: str | None = None
    restart_count: int = 0
    host: str = field(default_factory=host_name)
    #: ``SLURM_STEP_ID`` (absent in the batch step, which Slurm calls ``batch``) and ``SLURM_PROCID``: which
    #: step and which of its tasks, so that two processes of one step claiming one shard are caught.
    step_id: str | None = None
    procid: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JobInfo:
        """The job this process runs in, from ``environ`` (default: this process's environment)."""
        return cls(**job_fields(environ))

    @property
    def label(self) -> str:
        """``job 1234_5`` for an array task, ``job 1234`` for a plain job, ``local`` outside Slurm."""
        if self.array_job_id and self.array_task_id is not None:
            return f"job {self.array_job_id}_{self.array_task_id}"
        return f"job {self.job_id}" if self.job_id else "local"


@dataclass(frozen=True)
class ShardSpec:
    """Which slice of the source tasks this process owns.

    ``enabled`` is False when nothing asked for sharding; then every source task is kept and ids need
    not be deterministic. ``origin`` says which variables decided it, for logs and error messages.
    """

    index: int = 0
    count: int = 1
    strategy: str = "hash"
    enabled: bool = False
    origin: str = "not sharded"
    job: JobInfo = field(default_factory=JobInfo)
    #: ``CURATOR_SOURCE_LIST``: a file of source task ids (one a line) to shard instead of all of them;
    #: `curator-slurm retry` freezes the unfinished ones there so every retry shard splits the same list.
    source_list: str | None = None
    #: ``CURATOR_MANIFEST``: the directory of source tasks `curator-slurm submit` planned for this array
    #: (see ``curator_slurm.runs.manifest``); the task loads its shard's file instead of listing the input.
    manifest: str | None = None

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ShardConfigError(f"shard count {self.count} must be >= 1 ({self.origin})")
        if not 0 <= self.index < self.count:
            raise ShardConfigError(f"shard index {self.index} is outside 0..{self.count - 1} ({self.origin})")
        if self.strategy not in STRATEGIES:
            raise ShardConfigError(f"CURATOR_SHARD_STRATEGY={self.strategy!r} is not one of {', '.join(STRATEGIES)}")

    @property
    def label(self) -> str:
        return f"shard {self.index}/{self.count}" if self.enabled else "unsharded"

    @classmethod
    def single(cls) -> ShardSpec:
        """No sharding: this process does all the work."""
        return cls()

    @classmethod
    def explicit(cls, index: int, count: int, strategy: str = "hash") -> ShardSpec:
        """A given shard, e.g. for tests and for launchers other than Slurm."""
        return cls(index=index, count=count, strategy=strategy, enabled=True, origin=f"explicit {index}/{count}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ShardSpec:
        """Resolve the shard from ``environ`` (default: this process's environment); the rules are in
        :mod:`curator_slurm.settings`, which raises :class:`ShardConfigError` naming the variable."""
        return cls(job=JobInfo.from_env(environ), **shard_fields(environ))


__all__ = ["STRATEGIES", "JobInfo", "ShardSpec", "host_name"]

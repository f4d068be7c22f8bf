"""The run loop every executor shares (:meth:`BaseExecutor.execute`): the source stage lists the work in the
driver (through the adapter, which keeps only this shard's source tasks), a :class:`~curator_slurm.runs.session.
RunSession` claims the run directory, resumes, records and ends the run, and the executor only processes the
source tasks it is handed (:meth:`BaseExecutor.process_sources`, the one thing executors implement)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

from curator_slurm.backends.adapter import BaseStageAdapter, list_sources, manifest_sources
from curator_slurm.extras import require_all
from curator_slurm.logs import bound
from curator_slurm.runs.progress import RunProgress
from curator_slurm.runs.queue import WorkQueue
from curator_slurm.runs.record import ledger_record
from curator_slurm.runs.results import PipelineResult, SourceResult
from curator_slurm.runs.rundir import RunDir
from curator_slurm.runs.session import Listing, RunSession
from curator_slurm.runs.upstream import upstreams_of
from curator_slurm.settings import RunOptions
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.io.outputs import FAN_OUT_ABOVE
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.tasks import Task

#: ``should_stop()``: whether to start no new source task (a :class:`StopSignal` in a run).
StopCheck = Callable[[], bool]


class BaseExecutor:
    """Runs a built pipeline. Subclasses implement :meth:`process_sources`."""

    retry_backoff: float = 1.0
    progress_interval: float = 30.0
    #: While :meth:`execute` drives a run with a run directory: the shard's live progress, whose ``target``
    #: the workers an executor starts publish to (``runs.progress``); None otherwise.
    progress: RunProgress | None = None
    #: The optional modules this executor needs (``("ray",)``): checked as it is built, with the pip command.
    requires: ClassVar[tuple[str, ...]] = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls.requires:
            require_all(cls.requires, cls.__name__)
        return super().__new__(cls)

    @classmethod
    def for_workers(cls, workers: int | None) -> BaseExecutor:
        """This executor with ``workers`` processes or CPUs (None: what this process may use), as
        :func:`~curator_slurm.backends.registry.make_executor` builds it by name."""
        return cls()

    def process_sources(
        self, stages: list[ProcessingStage], sources: WorkQueue, shard: ShardSpec, should_stop: StopCheck
    ) -> Iterator[SourceResult]:
        """Push each source task through ``stages`` (everything after the source stage); yield one
        result per source task, in any order, only after all of its descendants are done. ``sources`` is a
        :class:`~curator_slurm.runs.queue.WorkQueue` (take tasks as they are started: ``take(n)``, or iterate;
        ``len()`` is a hint). Start no new source task once ``should_stop()`` is true."""
        raise NotImplementedError

    def run_source_stage(self, stage: ProcessingStage, shard: ShardSpec, log: Any) -> Listing:
        """Run the source stage in the driver (or load this shard's tasks from its manifest) and log what this
        shard keeps."""
        if shard.manifest:  # a task of a planned array loads its shard, it lists nothing
            adapter = manifest_sources(stage, shard, self.retry_backoff)
            how = f"from manifest {shard.manifest}"
        else:
            adapter = list_sources(stage, shard, self.retry_backoff)
            how = "listed by this process"
        assert adapter.selection is not None
        log.info(f"{adapter.selection.describe(shard)}, {how}")
        return listing_of(adapter)

    def execute(
        self,
        stages: list[ProcessingStage],
        shard: ShardSpec,
        run_dir: RunDir | None = None,
        fingerprint: dict[str, Any] | None = None,
        options: RunOptions | None = None,
    ) -> PipelineResult:
        """Run ``stages`` (built, source first) for this shard, recording every source task's fate in
        ``run_dir``; raise if any source task failed or a stop signal cut the run short."""
        options = options or RunOptions()
        log = bound(shard.label, shard.job.label)
        listing = self.run_source_stage(stages[0], shard, log)  # first: a bad input path must not claim a run dir
        hint_fan_out(stages, listing.total, log)
        names, upstreams = [s.name for s in stages], upstreams_of(stages)
        outputs = getattr(stages[-1], "existing_outputs", None)
        session = RunSession(
            listing, names, shard, run_dir, fingerprint or {}, options, log, self.progress_interval, upstreams, outputs
        )
        session.start()
        remove_dead_temporaries(stages, log)

        def work(queue: WorkQueue, should_stop: StopCheck) -> Iterator[SourceResult]:
            self.progress = session.progress  # set while the session drives (inside its run directory's marker)
            if len(stages) > 1:
                return self.process_sources(stages[1:], queue, shard, should_stop)
            return _passthrough(queue)

        try:
            session.drive(work)
        finally:
            self.progress = None
        return session.finish()


def listing_of(adapter: BaseStageAdapter) -> Listing:
    """What a source stage's adapter listed, as the run session takes it."""
    return Listing(
        adapter.stage.name, adapter.sources, adapter.kept, adapter.selection, adapter.manifest, adapter.shared
    )


def hint_fan_out(stages: list[ProcessingStage], total: int, log: Any) -> None:
    """Warn when a writer is to put the outputs of more than :data:`FAN_OUT_ABOVE` source tasks into one flat
    directory (``fan_out=True`` spreads them over hashed subdirectories)."""
    if total <= FAN_OUT_ABOVE:
        return
    for stage in stages:
        if isinstance(stage, BaseWriter) and not stage.fan_out:
            log.warning(
                f"{stage.name}: {total} source tasks write about as many files into {stage.path}; parallel "
                "filesystems slow down past some 10,000 entries a directory: give the writer fan_out=True"
            )


def remove_dead_temporaries(stages: list[ProcessingStage], log: Any) -> None:
    """Before any work: delete what writers on this host that are gone (kill -9, a node's OOM killer, a crashed
    earlier run of any executor) left half-written in the stages' output directories, and say what was left
    (temporary files of other hosts' writers, which may be alive). Every stage that writes files through
    :func:`curator_slurm.fs.atomic_write` and defines ``remove_dead_temporaries()`` takes part."""
    for stage in stages:
        clean = getattr(stage, "remove_dead_temporaries", None)
        if clean is None:
            continue
        cleanup = clean()
        if cleanup.removed:
            log.info(cleanup.describe())
        elif cleanup.other_hosts:
            log.warning(cleanup.describe())


def _passthrough(tasks: Iterable[Task]) -> Iterator[SourceResult]:
    for t in tasks:
        yield SourceResult(source_id=t.task_id, output_tasks=[t])


__all__ = ["BaseExecutor", "StopCheck", "ledger_record", "listing_of"]

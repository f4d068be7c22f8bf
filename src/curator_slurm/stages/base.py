"""Stage base classes: what a pipeline step is, independent of where it runs."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from ..extras import require_all
from ..tasks import Task
from .params import STAGE_CLASSES, stage_params

In = TypeVar("In", bound=Task)
Out = TypeVar("Out", bound=Task)
#: A stage's own class: what :meth:`ProcessingStage.with_` returns (a copy of the stage).
StageT = TypeVar("StageT", bound="ProcessingStage[Any, Any]")

#: In a stage's declared output fields: "every field that came in also goes out".
PASSTHROUGH = "*"


@dataclass(frozen=True)
class Resources:
    """What one instance of a stage needs: executors size their worker pools from it."""

    cpus: float = 1.0
    gpus: float = 0.0

    def __post_init__(self) -> None:
        if self.cpus < 0 or self.gpus < 0:
            raise ValueError(f"Resources(cpus={self.cpus}, gpus={self.gpus}): both must be >= 0")


def snake_case(name: str) -> str:
    """``WordCountFilter`` -> ``word_count_filter``: the default name of a stage or filter class."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class ProcessingStage(Generic[In, Out]):
    """One step of a pipeline.

    Subclasses implement :meth:`process` (one task in; a task, a list of tasks, or ``None`` out) or, for
    vectorised work, :meth:`process_batch`. Declaring :meth:`inputs` and :meth:`outputs` lets
    ``Pipeline.build`` catch a missing field before any data is read.
    """

    name: str = ""
    resources: Resources = Resources()
    batch_size: int = 1
    #: How many times a task is retried after its first failure in this stage.
    max_retries: int = 2
    #: Attributes that do not change what the stage produces (caches, resources loaded on first use): left
    #: out of the run fingerprint. A subclass lists its own; those of its bases count too.
    fingerprint_exclude: ClassVar[frozenset[str]] = frozenset()
    #: The optional modules this stage needs (``("trafilatura",)``): checked as the stage is built, so a
    #: missing extra fails before any work with the pip command that installs it.
    requires: ClassVar[tuple[str, ...]] = ()

    # Set by Pipeline.build.
    is_source_stage: bool = False
    is_sink_stage: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = snake_case(cls.__name__)

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls.requires:
            require_all(cls.requires, cls.__name__)
        return super().__new__(cls)

    # --- declarations -------------------------------------------------------------------------------
    def inputs(self) -> tuple[list[str], list[str]]:
        """(task attributes, data fields) this stage reads."""
        return [], []

    def outputs(self) -> tuple[list[str], list[str] | None]:
        """(task attributes, data fields) this stage produces; fields ``None`` means unknown, and
        :data:`PASSTHROUGH` among them means the input fields go through."""
        return [], None

    def upstreams(self) -> list[Any]:
        """The earlier phases whose recorded outputs this stage reads (``curator_slurm.runs.upstream.Upstream``):
        the run checks them before any work and does a task again when what it read was recorded again."""
        return []

    def output_dirs(self) -> list[str]:
        """The directories this stage writes files into: a run checks that each can be made before any
        work (a file in the way, a name too long)."""
        return []

    # --- life cycle ---------------------------------------------------------------------------------
    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        """Called once per worker before any task (load models, open connections)."""

    def teardown(self) -> None:
        """Called once per worker after the last task."""

    def end_source(self, source: Task, failed: bool, whole: bool = True) -> list[Task]:
        """Called in each process after the last batch of the source task ``source`` went through this stage
        (and for a source task none of whose batches came here): a stage that keeps something open per source
        task (a writer's one output file) publishes it and returns what it made, which the later stages then
        get; with ``failed`` (the source task failed, or the process is going down) it drops it instead.
        ``whole`` is False when this process saw only a slice of the source task's batches (one call of a
        Ray pool fed by another pool). Nothing by default."""
        return []

    def process(self, task: In) -> Out | list[Out] | None:
        raise NotImplementedError(f"stage {self.name!r} ({type(self).__name__}) must implement process()")

    def process_batch(self, tasks: list[In]) -> list[Out | list[Out] | Iterator[Out] | None]:
        """One entry per input task, in order: a task, a list of tasks, an iterator of tasks (handed on one
        at a time, each made when the one before has been taken), or ``None`` (filtered).

        Keeping one entry per input is what lets the framework trace every output to its source task.
        """
        return [self.process(t) for t in tasks]

    # --- configuration ------------------------------------------------------------------------------
    def with_(
        self: StageT,
        name: str | None = None,
        resources: Resources | None = None,
        batch_size: int | None = None,
        max_retries: int | None = None,
    ) -> StageT:
        """A copy of this stage with some settings overridden; the original is untouched."""
        new = copy.copy(self)
        if name is not None:
            new.name = name
        if resources is not None:
            new.resources = resources
        if batch_size is not None:
            if batch_size < 1:
                raise ValueError(f"{self.name}.with_(batch_size={batch_size}): batch_size must be >= 1")
            new.batch_size = batch_size
        if max_retries is not None:
            if max_retries < 0:
                raise ValueError(f"{self.name}.with_(max_retries={max_retries}): max_retries must be >= 0")
            new.max_retries = max_retries
        return new

    def params(self) -> dict[str, Any]:
        """The settings that define what this stage produces, for the run fingerprint: every instance
        attribute, private ones too, but not ``resources``, ``batch_size``, ``max_retries``, the flags
        ``Pipeline.build`` sets, nor what :attr:`fingerprint_exclude` lists; each value canonicalised (sets
        sorted, objects by class name and attributes; see :mod:`.params`). Override it
        to say exactly what defines the output (e.g. leave out where the input is mounted)."""
        return stage_params(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


STAGE_CLASSES.append(ProcessingStage)


class CompositeStage(ProcessingStage[In, Out]):
    """A user-facing stage made of several simpler ones; ``Pipeline.build`` replaces it by
    :meth:`decompose`."""

    def decompose(self) -> list[ProcessingStage]:
        raise NotImplementedError(f"composite stage {self.name!r} must implement decompose()")

    def process(self, task: In) -> Out | list[Out] | None:
        raise RuntimeError(f"composite stage {self.name!r} is not run directly; Pipeline.build decomposes it")

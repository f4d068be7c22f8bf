"""NeMo Curator's ``@processing_stage``: a function of one task made a stage (:class:`FunctionStage`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..tasks import DocumentBatch, Task, as_table
from .base import ProcessingStage, Resources


def _with_lineage(out: Any, task: Task[Any]) -> Any:
    """``out`` (a task the function returned) carrying ``task``'s metadata and stage times, as NeMo's
    decorator gives them; a DocumentBatch whose ``data`` was set to a pandas DataFrame becomes Arrow."""
    if isinstance(out, Task):
        out.metadata = {**out.metadata, **task.metadata}
        out.stage_perf = list(task.stage_perf)
        if isinstance(out, DocumentBatch):
            out.data = as_table(out.data)
    return out


class FunctionStage(ProcessingStage[Task[Any], Task[Any]]):
    """A stage whose ``process`` is ``fn(task)``: the function returns a task, a list of tasks or None. Its run
    fingerprint holds the function (module, qualified name, the values a closure captured, its source).

    Args:
        fn: a function of exactly one argument, the task.
        name: the stage's name (in logs, the funnel and ``status``).
        resources: what one instance needs (a :class:`Resources` or a dict of its fields).
        batch_size: tasks per call (None: 1).
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        name: str,
        resources: Resources | dict[str, float] | None = None,
        batch_size: int | None = None,
    ) -> None:
        if len(inspect.signature(fn).parameters) != 1:
            raise ValueError(
                "A processing stage function must accept exactly one positional argument (the input Task)."
            )
        self.fn = fn
        self.name = str(name)
        if isinstance(resources, dict):
            resources = Resources(**resources)
        self.resources = resources or Resources()
        self.batch_size = batch_size or 1

    def process(self, task: Task[Any]) -> Any:
        out = self.fn(task)
        if isinstance(out, list):
            return [_with_lineage(t, task) for t in out]
        return _with_lineage(out, task)

    def __repr__(self) -> str:
        return f"FunctionStage(name={self.name!r}, fn={getattr(self.fn, '__qualname__', self.fn)!r})"


def processing_stage(
    *, name: str, resources: Resources | dict[str, float] | None = None, batch_size: int | None = None
) -> Callable[[Callable[[Any], Any]], FunctionStage]:
    """NeMo Curator's decorator: ``@processing_stage(name="word_count")`` above ``def f(task): ...`` makes ``f``
    a stage (a :class:`FunctionStage` instance) to add to a pipeline. ``task.data`` is a ``pyarrow.Table``;
    ``task.to_pandas()`` gives a DataFrame, and a batch built from one (or given one as ``data``) becomes Arrow."""

    def decorator(fn: Callable[[Any], Any]) -> FunctionStage:
        return FunctionStage(fn, name=name, resources=resources, batch_size=batch_size)

    return decorator


__all__ = ["FunctionStage", "processing_stage"]

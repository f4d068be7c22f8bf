"""NeMo Curator's ``ScoreFilter``, ``Score`` and ``Filter``, spelled as NeMo spells them: one filter or a list, applied
in order, a later filter scoring only what the earlier ones kept."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage
from curator_slurm.stages.filters.base import (
    DocumentFilter,
    _column,
    as_scores,
    filter_name,
    keep_column,
    keep_mask,
    not_a_filter,
    score_column,
)
from curator_slurm.stages.filters.decide import BaseFilter, Decision, check_writer, set_column
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.text.compute import call, to_numpy
from curator_slurm.tasks import DocumentBatch

FilterLike = DocumentFilter | Callable[..., Any]
#: The fields a document's text is in, in the order the funnel's characters look for one: the text, else the
#: HTML a WARC reader gives before extraction.
DOCUMENT_FIELDS = ("text", "html")


@dataclass(frozen=True)
class Step:
    """One filter of a stage and its settings: the field it reads, where its score goes, and ``invert``."""

    fn: Any
    field: str
    score_field: str | None = None
    invert: bool = False


def _filters(owner: str, given: Any, callables: bool) -> list[Any]:
    """The filters ``given`` (one, or a list), each checked: a DocumentFilter instance, or (``callables``) a
    function; classes, stages and other values are refused with the fix."""
    items = list(given) if isinstance(given, (list, tuple)) else [given]
    if not items:
        raise ValueError(f"{owner}: give at least one filter")
    for item in items:
        function = callables and callable(item) and not isinstance(item, (type, ProcessingStage))
        if not (isinstance(item, DocumentFilter) or function):
            raise TypeError(not_a_filter(owner, item, callables))
    return items


def _per_filter(owner: str, parameter: str, value: Any, count: int, kind: type) -> list[Any]:
    """``value`` (one for all, or a list of one or ``count``) as ``count`` values, each of ``kind`` or None."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        raise ValueError(f"{owner}({parameter}={value!r}): give one, or one per filter ({count})")
    for v in values:
        if v is not None and not isinstance(v, kind):
            raise TypeError(f"{owner}({parameter}={value!r}): each must be a {kind.__name__}")
    return values


def _steps(owner: str, filters: list[Any], fields: Any, score_fields: Any, invert: Any, field_name: str) -> list[Step]:
    """NeMo's normalisation of a stage's parameters into one :class:`Step` per filter."""
    n = len(filters)
    # NeMo Curator's checks, with its exception types and words (a script that catches them keeps working).
    if fields is None:
        raise ValueError(f"{field_name} cannot be None")
    if score_fields is None and owner == "Score":
        raise ValueError("score_field cannot be None")
    if n > 1 and owner == "Filter" and (isinstance(fields, str) or len(fields) == 1):
        raise ValueError(f"filter_field must be a list of strings if multiple filters are used: {fields}")
    one_score = isinstance(score_fields, str) or (isinstance(score_fields, (list, tuple)) and len(score_fields) == 1)
    if n > 1 and owner != "Filter" and one_score:  # one column for several scores: each would overwrite the last
        raise ValueError(f"score_field must be a list of strings if multiple filters are used: {score_fields}")
    names = _per_filter(owner, field_name, fields, n, str)
    if any(not f for f in names):
        raise ValueError(f"{owner}({field_name}={fields!r}): each must be a field name")
    scores = _per_filter(owner, "score_field", score_fields, n, str)
    inverts = _per_filter(owner, "invert", invert, n, bool)
    return [Step(f, a, s, bool(i)) for f, a, s, i in zip(filters, names, scores, inverts, strict=True)]


def _loads(fn: Any) -> bool:
    return isinstance(fn, DocumentFilter) and (hasattr(fn, "load_model") or hasattr(fn, "load_tokenizer"))


def _stage_name(prefix: str, filters: list[Any]) -> str:
    return f"{prefix}[{'+'.join(filter_name(f) for f in filters)}]"


def _scores(step: Step, values: Any) -> Any:
    """The scores of a column: a filter's ``score_array``, or a function on each value (as NeMo's pandas
    ``apply`` gives it: a null stays None)."""
    if isinstance(step.fn, DocumentFilter):
        return as_scores(step.fn, step.fn.score_array(values))
    return score_column(step.fn, [step.fn(v) for v in values.to_pylist()])


def _keep(step: Step, values: Any) -> Any:
    """Which rows a filter's ``keep_array`` (or a function on each value) keeps, ``invert`` applied."""
    if isinstance(step.fn, DocumentFilter):
        keep = keep_mask(step.fn, step.fn.keep_array(values), len(values))
    else:
        scores = values.to_pylist()
        keep = keep_column(step.fn, [step.fn(v) for v in scores], scores)
    return call("invert", keep) if step.invert else keep


def _scatter(values: Any, alive: np.ndarray, rows: int) -> Any:
    """``values`` (one per row of ``alive``) put back at those rows of ``rows``, null elsewhere."""
    index = np.full(rows, -1, np.int64)
    index[alive] = np.arange(len(alive))
    return call("take", values, pa.array(index, pa.int64(), mask=index < 0))


def run_steps(task: DocumentBatch, steps: list[Step], score: bool, purpose: str, parameter: str) -> Decision:
    """NeMo's loop over a stage's filters: each scores (``score``) or reads its field on the documents the
    earlier ones kept, and drops those it does not keep; the decision names each dropped row's filter."""
    rows = task.data.num_rows
    if len(steps) == 1:  # the usual case, without the bookkeeping of a chain
        (step,) = steps
        values = _column(task, step.field, purpose, parameter)
        scored = _scores(step, values) if score else values
        columns = {step.score_field: scored} if score and step.score_field else {}
        return Decision(_keep(step, scored), None, None, columns)
    alive = np.arange(rows)
    reasons: list[str | None] = [None] * rows
    columns = {}
    for step in steps:
        values = _column(task, step.field, purpose, parameter)
        if len(alive) != rows:
            values = call("take", values, pa.array(alive, pa.int64()))
        scored = _scores(step, values) if score else values
        if score and step.score_field:
            columns[step.score_field] = scored if len(alive) == rows else _scatter(scored, alive, rows)
        kept = to_numpy(call("coalesce", _keep(step, scored), False)) if len(alive) else np.zeros(0, bool)
        for i in alive[~kept].tolist():
            reasons[i] = filter_name(step.fn)
        alive = alive[kept]
    keep = np.zeros(rows, dtype=bool)
    keep[alive] = True
    return Decision(keep, reasons, None, columns)


def document_texts(task: DocumentBatch, scored: str) -> pa.ChunkedArray | None:
    """The column whose characters a filter on ``scored`` removes, for the funnel: ``scored`` itself when it is
    ``text`` or ``html``, else the batch's ``text`` (or ``html`` before extraction), else ``scored`` when the
    batch has neither (its text is under another name) unless ``scored`` names a URL (``url`` in its name):
    a filter on a URL counts the documents' text, never the URL's length; None when there is none to count."""
    columns = task.data.column_names
    for name in (scored, *DOCUMENT_FIELDS):
        if name in DOCUMENT_FIELDS and name in columns:
            return task.data.column(name)
    if scored in columns and "url" not in scored.lower():
        return task.data.column(scored)
    return None


class ScoreFilter(BaseFilter):
    """Score ``text_field`` with a :class:`.base.DocumentFilter` (or each of a list, in order) and keep the
    documents it accepts (NeMo Curator's ``ScoreFilter``).

    ``score_field`` keeps the score as a column; ``invert`` keeps the rejected documents instead; each may be
    one for all or a list, one per filter. ``exclusion_writer`` (this project's, as datatrove's filters
    have it; default: the filter's own) gets the removed documents, each with the name of its filter.

    Args:
        filter_obj: a DocumentFilter, or a list of them applied in order.
        text_field: the field scored (one, or one per filter).
        score_field: the column each score goes to (None: not kept).
        invert: keep the documents the filter rejects (one, or one per filter).
        exclusion_writer: a writer for the removed documents (None: the filter's own, else none).
    """

    fingerprint_exclude = frozenset({"_steps"})  # derived from the parameters

    def __init__(
        self,
        filter_obj: DocumentFilter | Sequence[DocumentFilter],
        text_field: str | Sequence[str] = "text",
        score_field: str | Sequence[str | None] | None = None,
        invert: bool | Sequence[bool] = False,
        exclusion_writer: BaseWriter | None = None,
    ) -> None:
        filters = _filters("ScoreFilter", filter_obj, callables=False)
        own = filters[0].exclusion_writer if len(filters) == 1 else None
        super().__init__(check_writer("ScoreFilter", exclusion_writer) or own, "text")
        self.filter_obj = filter_obj
        self.text_field = text_field  # type: ignore[assignment]  # NeMo's: one field or one per filter
        self.score_field = score_field
        self.invert = invert
        self._steps = _steps("ScoreFilter", filters, text_field, score_field, invert, "text_field")
        self.name = _stage_name("score_filter", filters)

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], list(dict.fromkeys(s.field for s in self._steps))

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, *(s.score_field for s in self._steps if s.score_field)]

    def ray_stage_spec(self) -> dict[str, Any]:
        """NeMo's: whether a filter loads a model or a tokenizer (an actor, kept between tasks, on Ray)."""
        return {"is_actor_stage": any(_loads(s.fn) for s in self._steps)}

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        super().setup(worker_metadata)
        for step in self._steps:
            step.fn.setup(worker_metadata)

    def texts(self, task: DocumentBatch) -> None:
        return None  # each filter reads its own field (run_steps)

    def decide(self, texts: None, task: DocumentBatch) -> Decision:
        return run_steps(task, self._steps, True, "filter on", "text_field")

    def counted_texts(self, task: DocumentBatch, texts: Any) -> pa.ChunkedArray | None:
        return document_texts(task, self._steps[0].field)

    def reason(self) -> str | None:
        return filter_name(self._steps[0].fn)


class Score(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Add a score of ``text_field`` as the column ``score_field`` and keep every document (NeMo Curator's
    ``Score``): score once, then filter on the column with :class:`Filter`, perhaps several times with
    different thresholds. ``score_fn``: a DocumentFilter (its ``score_array``), a function of one value
    (``len``, a lambda), or a list of them, each with its own score field.

    Args:
        score_fn: a DocumentFilter or function, or a list of them applied in order.
        score_field: the column each score goes to (one per scorer).
        text_field: the field scored (one, or one per scorer).
    """

    fingerprint_exclude = frozenset({"_steps"})

    def __init__(
        self,
        score_fn: FilterLike | Sequence[FilterLike],
        score_field: str | Sequence[str],
        text_field: str | Sequence[str] = "text",
    ) -> None:
        scorers = _filters("Score", score_fn, callables=True)
        self.score_fn = score_fn
        self.score_field = score_field
        self.text_field = text_field
        self._steps = _steps("Score", scorers, text_field, score_field, False, "text_field")
        self.name = _stage_name("score", scorers)

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], list(dict.fromkeys(s.field for s in self._steps))

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, *(s.score_field for s in self._steps if s.score_field)]

    def ray_stage_spec(self) -> dict[str, Any]:
        """NeMo's: whether a filter loads a model or a tokenizer (an actor, kept between tasks, on Ray)."""
        return {"is_actor_stage": any(_loads(s.fn) for s in self._steps)}

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        for step in self._steps:
            if isinstance(step.fn, DocumentFilter):
                step.fn.setup(worker_metadata)

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        for step in self._steps:
            scores = _scores(step, _column(task, step.field, "score", "text_field"))
            assert step.score_field is not None
            table = set_column(table, step.score_field, scores)
        return task.derive(table)


class Filter(BaseFilter):
    """Keep the documents whose ``filter_field`` (a score column, e.g. from :class:`Score`, or any field such
    as ``language``) the filter accepts (NeMo Curator's ``Filter``): a DocumentFilter's ``keep_array``, or a
    function of one value returning a bool (a lambda); ``invert`` keeps the others. A list of filters needs a
    list of fields, one per filter. The funnel counts the characters of ``text_field`` it removed.

    Args:
        filter_fn: a DocumentFilter or function, or a list of them applied in order.
        filter_field: the field each one reads (a list for a list of filters).
        invert: keep the documents the filter rejects (one, or one per filter).
        text_field: the document's text, whose characters the funnel counts (not what is filtered on).
        exclusion_writer: a writer for the removed documents (None: none).
    """

    #: Only the funnel's character counts read ``text_field``: it does not change what the stage produces.
    fingerprint_exclude = frozenset({"text_field", "_steps"})

    def __init__(
        self,
        filter_fn: FilterLike | Sequence[FilterLike],
        filter_field: str | Sequence[str],
        invert: bool | Sequence[bool] = False,
        text_field: str = "text",
        exclusion_writer: BaseWriter | None = None,
    ) -> None:
        filters = _filters("Filter", filter_fn, callables=True)
        super().__init__(exclusion_writer, text_field)
        self.filter_fn = filter_fn
        self.filter_field = filter_field
        self.invert = invert
        self._steps = _steps("Filter", filters, filter_field, None, invert, "filter_field")
        self.name = _stage_name("filter", filters)

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], list(dict.fromkeys(s.field for s in self._steps))

    def texts(self, task: DocumentBatch) -> None:
        return None

    def decide(self, texts: None, task: DocumentBatch) -> Decision:
        return run_steps(task, self._steps, False, "filter on", "filter_field")

    def counted_texts(self, task: DocumentBatch, texts: Any) -> pa.ChunkedArray | None:
        columns = task.data.column_names
        return task.data.column(self.text_field) if self.text_field in columns else None

    def reason(self) -> str | None:
        return filter_name(self._steps[0].fn)


__all__ = ["DOCUMENT_FIELDS", "Filter", "FilterLike", "Score", "ScoreFilter", "Step", "document_texts", "run_steps"]

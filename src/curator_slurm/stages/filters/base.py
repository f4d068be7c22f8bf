"""Document filters and the stages that apply them.

A :class:`DocumentFilter` scores a column of texts and decides which to keep. The built-in filters
score whole columns at once (Arrow kernels and numpy over the column's bytes), so filtering costs
about what a hand-written pyarrow loop would; a custom filter may implement just
``score_document``/``keep_document`` on plain strings. :class:`ScoreFilter` scores and filters in one
stage; :class:`Score` only adds the score column and :class:`Filter` only filters on an existing one
(NeMo Curator's split of the same work).
"""

from __future__ import annotations

import pyarrow as pa

from ...errors import InputError
from ...tasks import DocumentBatch
from .._kernels import call, filter_table
from ..base import PASSTHROUGH, ProcessingStage


class DocumentFilter:
    """Scores documents and decides, from the score, whether to keep them."""

    name: str = "document_filter"

    def score_document(self, text: str) -> float:
        raise NotImplementedError(f"{type(self).__name__} must implement score_document or score_array")

    def keep_document(self, score: float) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement keep_document or keep_array")

    def score_array(self, texts: pa.ChunkedArray) -> pa.Array:
        """Scores of a column of texts (nulls count as empty text)."""
        return pa.array([self.score_document(t or "") for t in texts.to_pylist()], type=pa.float64())

    def keep_array(self, scores: pa.Array) -> pa.Array:
        return pa.array([self.keep_document(s) for s in scores.to_pylist()], type=pa.bool_())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()))
        return f"{type(self).__name__}({args})"


def _not_a_filter(wrapper: str, given: object) -> str:
    """The error for a wrapper given something other than a :class:`DocumentFilter`; a stage (such as
    ``FastTextQualityFilter``, a filter in NeMo Curator but a stage here) goes into the pipeline itself."""
    if isinstance(given, ProcessingStage):
        return f"{wrapper} needs a DocumentFilter; {type(given).__name__} is a stage: add it to the pipeline itself"
    return f"{wrapper} needs a DocumentFilter instance, got {given!r}"


def between(scores: pa.Array, low: float | None, high: float | None) -> pa.Array:
    """``low <= score <= high`` for each score (a bound of ``None`` is no bound; a null score is not kept)."""
    mask = call("is_valid", scores)
    if low is not None:
        mask = call("and", mask, call("greater_equal", scores, low))
    if high is not None:
        mask = call("and", mask, call("less_equal", scores, high))
    return mask


class ScoreFilter(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Score ``text_field`` with a :class:`DocumentFilter` and keep the documents it accepts.

    ``score_field`` keeps the score as a column; ``invert`` keeps the rejected documents instead.
    """

    def __init__(
        self,
        filter_obj: DocumentFilter,
        text_field: str = "text",
        score_field: str | None = None,
        invert: bool = False,
    ) -> None:
        if not isinstance(filter_obj, DocumentFilter):
            raise TypeError(_not_a_filter("ScoreFilter", filter_obj))
        self.filter_obj = filter_obj
        self.text_field = text_field
        self.score_field = score_field
        self.invert = invert
        self.name = f"score_filter[{filter_obj.name}]"

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, *([self.score_field] if self.score_field else [])]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        scores = self.filter_obj.score_array(_column(task, self.text_field, "filter on", "text_field"))
        keep = self.filter_obj.keep_array(scores)
        if self.invert:
            keep = call("invert", keep)
        if self.score_field:
            table = _with_column(table, self.score_field, scores)
        return task.derive(filter_table(table, keep))


def _column(task: DocumentBatch, field: str, purpose: str, parameter: str) -> pa.ChunkedArray:
    """The batch's column ``field``, or an error naming the batch's files, the field and the fix."""
    table = task.data
    if field not in table.column_names:
        where = ", ".join(task.metadata.get("files", [])) or task.task_id
        raise InputError(
            f"{where}: no field {field!r} to {purpose}; the data has {table.column_names}. "
            f"Set {parameter}= to one of them."
        )
    return table.column(field)


def _with_column(table: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``table`` with ``values`` as column ``name``, replacing a column of that name in place."""
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, values)
    return table.append_column(name, values)


class Score(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Add a :class:`DocumentFilter`'s score of ``text_field`` as the column ``score_field`` and keep
    every document (NeMo Curator's ``Score``): score once, then filter on the column with
    :class:`Filter`, perhaps several times with different thresholds."""

    def __init__(self, score_fn: DocumentFilter, score_field: str, text_field: str = "text") -> None:
        if not isinstance(score_fn, DocumentFilter):
            raise TypeError(_not_a_filter("Score", score_fn))
        self.score_fn = score_fn
        self.score_field = score_field
        self.text_field = text_field
        self.name = f"score[{score_fn.name}]"

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, self.score_field]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        scores = self.score_fn.score_array(_column(task, self.text_field, "score", "text_field"))
        return task.derive(_with_column(task.data, self.score_field, scores))


class Filter(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Keep the documents whose ``filter_field`` (a score column, e.g. from :class:`Score`) the
    :class:`DocumentFilter`'s ``keep_array`` accepts (NeMo Curator's ``Filter``); ``invert`` keeps the
    others."""

    def __init__(self, filter_fn: DocumentFilter, filter_field: str, invert: bool = False) -> None:
        if not isinstance(filter_fn, DocumentFilter):
            raise TypeError(_not_a_filter("Filter", filter_fn))
        self.filter_fn = filter_fn
        self.filter_field = filter_field
        self.invert = invert
        self.name = f"filter[{filter_fn.name}]"

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.filter_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        keep = self.filter_fn.keep_array(_column(task, self.filter_field, "filter on", "filter_field"))
        if self.invert:
            keep = call("invert", keep)
        return task.derive(filter_table(task.data, keep))

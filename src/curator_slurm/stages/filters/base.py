"""Document filters and the stages that apply them.

A :class:`DocumentFilter` scores a column of texts and decides which to keep. The built-in filters
score whole columns at once (Arrow kernels and numpy over the column's bytes), so filtering costs
about what a hand-written pyarrow loop would; a custom filter may implement just
``score_document``/``keep_document`` on plain strings. :class:`ScoreFilter` scores and filters in one
stage; :class:`Score` only adds the score column and :class:`Filter` only filters on an existing one
(NeMo Curator's split of the same work).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from curator_slurm.stages.text.compute import call, filter_table

from ...errors import FilterError, InputError
from ...tasks import DocumentBatch
from ..base import PASSTHROUGH, ProcessingStage, snake_case
from ..notes import note_removed_chars


class DocumentFilter:
    """Scores documents and decides, from the score, whether to keep them.

    As in NeMo Curator, ``score_document`` may return any value Arrow can hold in a column (a number, a
    bool, a string, a list; numpy scalars too), and ``keep_document`` gets it back and returns whether to
    keep the document: a bool, a numpy bool, or an int (0 drops, any other keeps). The filter's ``name``
    (in stage names, logs and the funnel of ``status``) is its class name in snake case unless the class
    or instance sets one (NeMo's ``self._name`` too).
    """

    name: str = "document_filter"
    #: Attributes that do not change the output (caches built on first use): left out of the fingerprint.
    fingerprint_exclude: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = snake_case(cls.__name__)

    def score_document(self, text: str) -> float:
        raise NotImplementedError(f"{type(self).__name__} must implement score_document or score_array")

    def keep_document(self, score: float) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must implement keep_document or keep_array")

    def score_array(self, texts: pa.ChunkedArray) -> pa.Array:
        """Scores of a column of texts (nulls count as empty text), typed by what ``score_document``
        returns (a filter scoring with bools gets a bool column, as NeMo's pandas column would be)."""
        return score_column(self, [self.score_document(t or "") for t in texts.to_pylist()])

    def keep_array(self, scores: pa.Array | pa.ChunkedArray) -> pa.Array:
        return keep_column(self, [self.keep_document(s) for s in scores.to_pylist()], scores.to_pylist())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()))
        return f"{type(self).__name__}({args})"


def _not_a_filter(wrapper: str, given: object) -> str:
    """The error for a wrapper given something other than a :class:`DocumentFilter`; a stage (such as
    ``FastTextQualityFilter``, a filter in NeMo Curator but a stage here) goes into the pipeline itself."""
    if isinstance(given, ProcessingStage):
        return f"{wrapper} needs a DocumentFilter; {type(given).__name__} is a stage: add it to the pipeline itself"
    return f"{wrapper} needs a DocumentFilter instance, got {given!r}"


def filter_name(f: DocumentFilter) -> str:
    """What ``f`` is called: its own ``name`` (or NeMo's ``_name``) if the instance sets one, else its class's."""
    own = vars(f).get("name") or vars(f).get("_name")
    return own if isinstance(own, str) and own else f.name


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def score_column(f: DocumentFilter, scores: list[Any]) -> pa.Array:
    """The scores ``f.score_document`` returned as one Arrow column (float64 when nothing says the type),
    or a :class:`FilterError` naming the filter and the values that do not fit one column."""
    values = [_plain(v) for v in scores]
    kinds = {type(v) for v in values if v is not None}
    # The type said when the values say it plainly: pyarrow's own inference looks for pandas and dateutil
    # along sys.path on every call (pyarrow 14), which would cost every batch an import search.
    known = {frozenset({bool}): pa.bool_(), frozenset({int}): pa.int64(), frozenset({float}): pa.float64()}
    known[frozenset({int, float})] = pa.float64()
    try:
        column = pa.array(values, type=known.get(frozenset(kinds)))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        kinds = sorted({type(v).__name__ for v in values})
        raise FilterError(
            f"{type(f).__name__}.score_document returned values that do not fit one column (types {kinds}; {e}). "
            "Return one kind of value for every document (e.g. always a float, or always a bool)"
        ) from e
    return column.cast(pa.float64()) if pa.types.is_null(column.type) else column


def keep_column(f: DocumentFilter, decisions: list[Any], scores: list[Any] | None = None) -> pa.Array:
    """``keep_document``'s decisions as a bool column: bools and numpy bools as they are, ints by their truth
    (NeMo's idiom ``return score`` with a count); anything else is a :class:`FilterError` naming the filter
    and what it returned (retrying cannot help, so the task fails at once)."""
    out = []
    for i, decision in enumerate(decisions):
        value = _plain(decision)
        if isinstance(value, int):  # bool is an int
            out.append(bool(value))
            continue
        score = f" for the score {scores[i]!r}" if scores is not None else ""
        raise FilterError(
            f"{type(f).__name__}.keep_document returned {value!r} ({type(decision).__name__}){score}; it must "
            "return a bool (True keeps the document), e.g. `return score >= threshold`"
        )
    return pa.array(out, type=pa.bool_())


def keep_mask(f: DocumentFilter, keep: Any, rows: int) -> pa.Array | pa.ChunkedArray:
    """What ``f.keep_array`` returned, as a bool column of ``rows`` entries (a list or numpy array is
    converted), or a :class:`FilterError` naming the filter and what it returned."""
    if isinstance(keep, (pa.Array, pa.ChunkedArray)) and pa.types.is_boolean(keep.type):
        mask = keep
    elif isinstance(keep, (pa.Array, pa.ChunkedArray, np.ndarray, list, tuple)):
        values = keep.to_pylist() if isinstance(keep, (pa.Array, pa.ChunkedArray)) else list(keep)
        mask = keep_column(f, values)
    else:
        raise FilterError(
            f"{type(f).__name__}.keep_array returned {type(keep).__name__}; it must return a bool array with one "
            "entry per document"
        )
    if len(mask) != rows:
        raise FilterError(f"{type(f).__name__}.keep_array returned {len(mask)} decisions for {rows} documents")
    return mask


def as_scores(f: DocumentFilter, scores: Any) -> pa.Array | pa.ChunkedArray:
    """What ``f.score_array`` returned, as an Arrow column (a list or numpy array is converted)."""
    if isinstance(scores, (pa.Array, pa.ChunkedArray)):
        return scores
    if isinstance(scores, (np.ndarray, list, tuple)):
        return score_column(f, list(scores))
    raise FilterError(f"{type(f).__name__}.score_array returned {type(scores).__name__}; it must return an array")


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
        self.name = f"score_filter[{filter_name(filter_obj)}]"

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, *([self.score_field] if self.score_field else [])]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        f = self.filter_obj
        texts = _column(task, self.text_field, "filter on", "text_field")
        scores = as_scores(f, f.score_array(texts))
        keep = keep_mask(f, f.keep_array(scores), table.num_rows)
        if self.invert:
            keep = call("invert", keep)
        if self.score_field:
            table = _with_column(table, self.score_field, scores)
        return note_removed_chars(task.derive(filter_table(table, keep)), texts, keep)


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
        self.name = f"score[{filter_name(score_fn)}]"

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, self.score_field]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        scores = as_scores(
            self.score_fn, self.score_fn.score_array(_column(task, self.text_field, "score", "text_field"))
        )
        return task.derive(_with_column(task.data, self.score_field, scores))


class Filter(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Keep the documents whose ``filter_field`` (a score column, e.g. from :class:`Score`) the
    :class:`DocumentFilter`'s ``keep_array`` accepts (NeMo Curator's ``Filter``); ``invert`` keeps the
    others. The funnel counts the characters of ``text_field`` it removed (unknown without that column)."""

    #: Only the funnel's character counts read ``text_field``: it does not change what the stage produces.
    fingerprint_exclude = frozenset({"text_field"})

    def __init__(
        self, filter_fn: DocumentFilter, filter_field: str, invert: bool = False, text_field: str = "text"
    ) -> None:
        if not isinstance(filter_fn, DocumentFilter):
            raise TypeError(_not_a_filter("Filter", filter_fn))
        self.filter_fn = filter_fn
        self.filter_field = filter_field
        self.invert = invert
        self.text_field = text_field
        self.name = f"filter[{filter_name(filter_fn)}]"

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.filter_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        f = self.filter_fn
        keep = keep_mask(
            f, f.keep_array(_column(task, self.filter_field, "filter on", "filter_field")), task.data.num_rows
        )
        if self.invert:
            keep = call("invert", keep)
        out = task.derive(filter_table(task.data, keep))
        if self.text_field in task.data.column_names:
            note_removed_chars(out, task.data.column(self.text_field), keep)
        return out

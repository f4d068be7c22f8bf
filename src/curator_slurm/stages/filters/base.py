"""NeMo Curator's ``DocumentFilter``: a filter written as a score and a decision on it (whole columns, or
``score_document``/``keep_document`` on plain strings), which is a stage itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from curator_slurm.stages.filters.decide import BaseFilter, Decision
from curator_slurm.stages.text.compute import call

from ...errors import FilterError, InputError
from ...tasks import DocumentBatch
from ..base import ProcessingStage, snake_case

#: Hooks NeMo Curator's ``ScoreFilter`` calls on a filter that has them, once per worker, in this order.
NEMO_SETUP_HOOKS = ("model_check_or_download", "load_model", "load_tokenizer")


class DocumentFilter(BaseFilter):
    """Scores documents and decides, from the score, whether to keep them.

    As in NeMo Curator, ``score_document`` may return any value Arrow can hold in a column (a number, a
    bool, a string, a list; numpy scalars too), and ``keep_document`` gets it back and returns whether to
    keep the document: a bool, a numpy bool, or an int (0 drops, any other keeps). The filter's ``name``
    (in stage names, logs and the funnel of ``status``) is its class name in snake case unless the class
    or instance sets one (NeMo's ``self._name`` too).

    Added to a pipeline itself, a filter scores ``text_field`` (``text``) and keeps what it accepts, the
    removed documents going to an ``exclusion_writer`` given with :meth:`~.decide.BaseFilter.with_`; wrapped
    in :class:`.score.ScoreFilter` it scores another field, keeps the score, or is inverted, as in NeMo.
    """

    _class_name: ClassVar[str] = "document_filter"
    #: Attributes that do not change the output (caches built on first use): left out of the fingerprint.
    fingerprint_exclude: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        declared = cls.__dict__.get("name")
        super().__init_subclass__(**kwargs)
        if isinstance(declared, property):  # a class that computes its name (from its parameters) keeps it
            return
        cls._class_name = declared if isinstance(declared, str) and declared else snake_case(cls.__name__)
        # An instance's own name wins (a class attribute set by a subclass would hide the property).
        cls.name = DocumentFilter.__dict__["name"]  # type: ignore[method-assign]  # the property, reinstated

    @property
    def name(self) -> str:
        """The instance's own ``name`` (or NeMo's ``_name``) if it sets one, else its class's."""
        own = self.__dict__.get("name") or self.__dict__.get("_name")
        return own if isinstance(own, str) and own else type(self)._class_name

    @name.setter
    def name(self, value: str) -> None:
        self.__dict__["name"] = value

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

    # --- as a stage of its own --------------------------------------------------------------------------
    def texts(self, task: DocumentBatch) -> pa.ChunkedArray:
        return _column(task, self.text_field, "filter on", "text_field")

    def decide(self, texts: pa.ChunkedArray, task: DocumentBatch) -> Decision:
        scores = as_scores(self, self.score_array(texts))
        return Decision(keep_mask(self, self.keep_array(scores), task.data.num_rows))

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        super().setup(worker_metadata)
        for hook in NEMO_SETUP_HOOKS:  # a NeMo filter that loads a model: ScoreFilter's set-up calls these
            method = getattr(self, hook, None)
            if callable(method):
                method()

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()))
        return f"{type(self).__name__}({args})"


def not_a_filter(wrapper: str, given: object, callables: bool = False) -> str:
    """The error for a wrapper given something other than a :class:`DocumentFilter` (or, where ``callables``,
    a function); a stage (such as ``FastTextQualityFilter``, a filter in NeMo Curator but a stage here) goes
    into the pipeline itself."""
    if isinstance(given, ProcessingStage):
        return f"{wrapper} needs a DocumentFilter; {type(given).__name__} is a stage: add it to the pipeline itself"
    if isinstance(given, type):
        return f"{wrapper} needs a DocumentFilter instance, got the class {given.__name__}; write {given.__name__}()"
    if callable(given) and not callables:
        name = getattr(given, "__name__", type(given).__name__)
        return (
            f"{wrapper} needs a DocumentFilter (it scores with score_document and decides with keep_document; NeMo "
            f"Curator's {wrapper} fails on a plain function when it runs), got the function {name}: use "
            f"Filter({name}, filter_field=...) for a function that returns True to keep a document, or "
            f"Score({name}, score_field=...) and then a Filter on that score"
        )
    return f"{wrapper} needs a DocumentFilter instance{' or a function' if callables else ''}, got {given!r}"


def filter_name(f: DocumentFilter | Callable[..., Any]) -> str:
    """What ``f`` is called: a filter's ``name`` (its own, NeMo's ``_name``, or its class's); a function's name."""
    if isinstance(f, DocumentFilter):
        return f.name
    return getattr(f, "__name__", type(f).__name__)


def _owner(f: Any, method: str) -> str:
    """``MyFilter.keep_document`` for a filter, ``the function is_english`` for a plain function."""
    return f"{type(f).__name__}.{method}" if isinstance(f, DocumentFilter) else f"the function {filter_name(f)}"


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def score_column(f: Any, scores: list[Any]) -> pa.Array:
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
        names = sorted({type(v).__name__ for v in values})
        raise FilterError(
            f"{_owner(f, 'score_document')} returned values that do not fit one column (types {names}; {e}). "
            "Return one kind of value for every document (e.g. always a float, or always a bool)"
        ) from e
    return column.cast(pa.float64()) if pa.types.is_null(column.type) else column


def keep_column(f: Any, decisions: list[Any], scores: list[Any] | None = None) -> pa.Array:
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
            f"{_owner(f, 'keep_document')} returned {value!r} ({type(decision).__name__}){score}; it must "
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


def _column(task: DocumentBatch, field: str, purpose: str, parameter: str) -> pa.ChunkedArray:
    """The batch's column ``field``, or an error naming the batch's files, the field and the fix."""
    table = task.data
    if field not in table.column_names:
        where = task.where()
        raise InputError(
            f"{where}: no field {field!r} to {purpose}; the data has {table.column_names}. "
            f"Set {parameter}= to one of them."
        )
    return table.column(field)

"""Language identification offline, with the model compiled into a package: CLD2 through ``pycld2``.

Why CLD2 (pycld2): its model is part of the compiled extension, so nothing is downloaded at run time
(an array task on a compute node often cannot reach the internet, and NeMo Curator's fastText filter
needs a model file fetched beforehand); it installs from wheels (gcld3 has none for Python 3.11 here
and needs protobuf; langid.py is pure Python on numpy and slower); it identifies 80+ languages at
10-25 MB/s per core here, nearly all of it in CLD2 itself; and its import takes about 2 ms, paid
only when a language stage first runs (never when this package is imported).

The score of a document is the fraction of its text (by bytes, as CLD2 counts them) that is in its
most likely language, 0 to 1. CLD2 answers ``"un"`` (unknown) with score 0 for text it cannot call
reliably (very short text, digits, symbols) unless ``best_effort`` is set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from .._lazy import LazyModule
from ..errors import InputError
from ..extras import require
from ..tasks import DocumentBatch
from ._kernels import call, cast, filter_table, replace_regex
from .base import PASSTHROUGH, ProcessingStage

_cld2 = LazyModule("pycld2")
_compute = LazyModule("pyarrow._compute")

#: CLD2 refuses text holding these code points (C0 controls but tab, LF, FF and CR; DEL and the C1
#: controls; the Unicode non-characters): they become spaces before detection, which changes no word.
_REFUSED = (
    r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\x{fdd0}-\x{fdef}"
    + "".join(f"\\x{{{plane:x}fffe}}\\x{{{plane:x}ffff}}" for plane in range(17))
    + "]"
)

UNKNOWN = "un"


def detect_language(text: str, best_effort: bool = False) -> tuple[str, float]:
    """(language code, score) of one text, as CLD2 sees it: ``("en", 0.98)``; ``("un", 0.0)`` when it
    cannot tell. ``text`` must be free of the code points CLD2 refuses (see :func:`detect_languages`)."""
    try:
        reliable, _, details = _cld2.detect(text, isPlainText=True, bestEffort=best_effort)
    except _cld2.error:
        return UNKNOWN, 0.0
    _, code, percent, _ = details[0]
    if code == UNKNOWN or not (reliable or best_effort):
        return UNKNOWN, 0.0
    return code, percent / 100.0


def detect_languages(texts: pa.Array | pa.ChunkedArray, best_effort: bool = False) -> tuple[pa.Array, pa.Array]:
    """The language codes (string) and scores (float64) of a column of texts; nulls are ``"un"``, 0."""
    if pa.types.is_null(texts.type):
        texts = cast(texts, pa.string())
    cleaned = replace_regex(call("coalesce", texts, ""), _REFUSED, " ")
    codes: list[str] = []
    scores: list[float] = []
    for text in cleaned.to_pylist():
        code, score = detect_language(text, best_effort) if text else (UNKNOWN, 0.0)
        codes.append(code)
        scores.append(score)
    return pa.array(codes, pa.string()), pa.array(scores, pa.float64())


class LanguageFilter(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Identify each document's language with CLD2; keep those in ``languages`` whose score is at least
    ``min_score``, and write the language and score as columns.

    ``languages``: codes as CLD2 gives them ("en", "de", "zh", "zh-Hant", ...; any case), one code or
    several; None keeps every document (a scorer that only adds the columns). ``language_field`` and
    ``score_field`` name the columns (None: not written). ``invert`` keeps the documents that fail.
    ``best_effort`` lets CLD2 guess on short text it would otherwise call unknown.
    """

    name = "language_filter"

    def __init__(
        self,
        languages: str | Sequence[str] | None = "en",
        min_score: float = 0.3,
        text_field: str = "text",
        language_field: str | None = "language",
        score_field: str | None = "language_score",
        invert: bool = False,
        best_effort: bool = False,
    ) -> None:
        require("pycld2", "LanguageFilter")
        if isinstance(languages, str):
            languages = [languages]
        self.languages = sorted({code.lower() for code in languages}) if languages is not None else None
        if self.languages is not None and not self.languages:
            raise ValueError("LanguageFilter(languages=[]): name at least one language, or None to keep all")
        if not 0.0 <= min_score <= 1.0:
            raise ValueError(f"LanguageFilter(min_score={min_score}): a score is a fraction between 0 and 1")
        self.min_score = float(min_score)
        self.text_field = text_field
        self.language_field = language_field
        self.score_field = score_field
        self.invert = invert
        self.best_effort = best_effort

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        written = [f for f in (self.language_field, self.score_field) if f]
        return ["data"], [PASSTHROUGH, *written]

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        _cld2.detect  # noqa: B018 - import pycld2 once per worker, before the first task

    def keep_mask(self, codes: pa.Array, scores: pa.Array) -> pa.Array:
        """Which documents to keep, from their codes and scores."""
        keep = call("greater_equal", scores, self.min_score)
        if self.languages is not None:
            lowered = call("utf8_lower", codes)
            keep = call(
                "and",
                keep,
                call("is_in", lowered, options=_compute.SetLookupOptions(pa.array(self.languages, pa.string()))),
            )
        return call("invert", keep) if self.invert else keep

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        if self.text_field not in table.column_names:
            where = ", ".join(task.metadata.get("files", [])) or task.task_id
            raise InputError(
                f"{where}: no field {self.text_field!r} to identify the language of; the data has "
                f"{table.column_names}. Set text_field= to one of them."
            )
        codes, scores = detect_languages(table.column(self.text_field), self.best_effort)
        for field, values in ((self.language_field, codes), (self.score_field, scores)):
            if not field:
                continue
            if field in table.column_names:
                table = table.set_column(table.column_names.index(field), field, values)
            else:
                table = table.append_column(field, values)
        return task.derive(filter_table(table, self.keep_mask(codes, scores)))

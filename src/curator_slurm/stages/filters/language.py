"""Language identification offline: CLD2 through ``pycld2`` (the default; its model is compiled into the package),
or a fastText model file the user gives: ``backend="ft176"`` (lid.176, also ``"fasttext"``) or ``"glotlid"``,
datatrove's semantics.
Design: docs/design.md, section Filters."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm._lazy import LazyModule
from curator_slurm.errors import InputError
from curator_slurm.extras import require
from curator_slurm.stages.base import PASSTHROUGH
from curator_slurm.stages.filters.decide import BaseFilter, Decision
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.text.compute import call, cast, is_in, replace_regex
from curator_slurm.tasks import DocumentBatch

_cld2 = LazyModule("pycld2")

#: CLD2 refuses text holding these code points (C0 controls but tab, LF, FF and CR; DEL and the C1
#: controls; the Unicode non-characters): they become spaces before detection, which changes no word.
_REFUSED = (
    r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\x{fdd0}-\x{fdef}"
    + "".join(f"\\x{{{plane:x}fffe}}\\x{{{plane:x}ffff}}" for plane in range(17))
    + "]"
)

UNKNOWN = "un"
#: The identifiers: CLD2 (built in) or a fastText model file: "ft176" (datatrove's name; "fasttext" too) or
#: "glotlid" (labels ``<language>_<script>``, written as two columns).
BACKENDS = ("cld2", "fasttext", "ft176", "glotlid")
FASTTEXT_BACKENDS = ("fasttext", "glotlid")
#: Defaults of the two thresholds (the CLD2 one is this package's; the fastText one is datatrove's).
DEFAULT_MIN_SCORE = 0.3
DEFAULT_LANGUAGE_THRESHOLD = 0.65


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


class LanguageFilter(BaseFilter):
    """Identify each document's language; keep the languages asked for, and write the language and its
    score as columns.

    With CLD2 (the default, extra ``[lang]``; offline, no model file) a document is kept when its most likely
    language is in ``languages`` and its score is at least ``min_score``; codes are CLD2's ("en", "de", "zh",
    "zh-Hant", ...; any case). With fastText (extra ``[fasttext]``) the decision is datatrove's: every label is
    scored on the text with newlines made spaces, and a document is kept when **any** of ``languages`` scores
    strictly above ``language_threshold`` (with ``languages=None``, when the best label does). The columns then
    hold the best label over all the model's labels and its score (as datatrove's metadata does), so a kept
    document's column may name another language when the threshold is low; codes are the model's labels
    without ``__label__`` ("en" for lid.176, "eng_Latn" for GlotLID; any case; each must be the model's).
    With ``backend="glotlid"`` the best label is written as datatrove writes it: the language (``eng``) and its
    script (``Latn``, in ``script_field``). With ``keep_top_pairs_threshold`` every label (of ``languages``, or of
    the model when it is None) scoring above it gets a column ``top_language_<label>_score`` (null below it).

    Args:
        languages: the code or codes kept; None keeps every document (CLD2) or those whose best label passes.
        min_score: CLD2's least score kept (default 0.3).
        text_field: the field identified.
        language_field: the column of the language (None: not written).
        score_field: the column of its score (None: not written).
        invert: keep the documents that fail instead.
        best_effort: let CLD2 guess on short text it would otherwise call unknown.
        backend: ``"cld2"``, ``"ft176"`` (or ``"fasttext"``) or ``"glotlid"``.
        model_path: the fastText model file (``lid.176.bin``, GlotLID's ``model_v3.bin``), for the fastText
            backends; never downloaded.
        language_threshold: fastText's score a language must exceed (default 0.65).
        label_only: keep every document and only write the columns (datatrove's).
        keep_top_pairs_threshold: write ``top_language_<label>_score`` for labels scoring above it (datatrove's;
            -1: none).
        script_field: the column of GlotLID's script (datatrove's ``language_script``).
        exclusion_writer: a writer for the removed documents, with their columns (None: none).
    """

    name = "language_filter"
    fingerprint_exclude = frozenset({"_model"})  # the fastText model loaded by setup(); model_path says which

    def __init__(
        self,
        languages: str | Sequence[str] | None = "en",
        min_score: float | None = None,
        text_field: str = "text",
        language_field: str | None = "language",
        score_field: str | None = "language_score",
        invert: bool = False,
        best_effort: bool = False,
        backend: str = "cld2",
        model_path: str | os.PathLike | None = None,
        language_threshold: float | None = None,
        label_only: bool = False,
        exclusion_writer: BaseWriter | None = None,
        keep_top_pairs_threshold: float = -1,
        script_field: str | None = "language_script",
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"LanguageFilter(backend={backend!r}): one of {BACKENDS}")
        self.backend = "fasttext" if backend == "ft176" else backend
        fasttext = self.backend in FASTTEXT_BACKENDS
        if keep_top_pairs_threshold != -1 and not fasttext:
            raise ValueError("LanguageFilter(keep_top_pairs_threshold=...): for the fastText backends (ft176, glotlid)")
        require("fasttext" if fasttext else "pycld2", "LanguageFilter" + (f"(backend={backend!r})" if fasttext else ""))
        if isinstance(languages, str):
            languages = [languages]
        self.languages = sorted({code.lower() for code in languages}) if languages is not None else None
        if self.languages is not None and not self.languages:
            raise ValueError("LanguageFilter(languages=[]): name at least one language, or None to keep all")
        if fasttext:
            if min_score is not None or best_effort:
                raise ValueError(
                    "LanguageFilter(backend='fasttext'): min_score and best_effort are CLD2's; "
                    "the fastText backend takes language_threshold (datatrove's, default 0.65)"
                )
            if model_path is None:
                raise ValueError(
                    "LanguageFilter(backend='fasttext') needs model_path=, a fastText language model file "
                    "(e.g. lid.176.bin from https://fasttext.cc/docs/en/language-identification.html)"
                )
            from curator_slurm.stages.filters.classifiers import check_model_file

            self.model_path: str | None = check_model_file(model_path, "LanguageFilter")
            threshold = DEFAULT_LANGUAGE_THRESHOLD if language_threshold is None else float(language_threshold)
        else:
            if model_path is not None or language_threshold is not None:
                raise ValueError(
                    "LanguageFilter: model_path and language_threshold are for backend='fasttext'; "
                    "CLD2 (the default backend) takes min_score"
                )
            self.model_path = None
            threshold = DEFAULT_MIN_SCORE if min_score is None else float(min_score)
        if not 0.0 <= threshold <= 1.0:
            name = "language_threshold" if fasttext else "min_score"
            raise ValueError(f"LanguageFilter({name}={threshold}): a score is a fraction between 0 and 1")
        super().__init__(exclusion_writer, text_field)
        self.min_score = None if fasttext else threshold
        self.language_threshold = threshold if fasttext else None
        self.language_field = language_field
        self.score_field = score_field
        self.invert = invert
        self.best_effort = best_effort
        self.label_only = label_only
        self.keep_top_pairs_threshold = float(keep_top_pairs_threshold)
        self.script_field = script_field if self.backend == "glotlid" else None
        self._model: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_model": None}  # a loaded fastText model does not pickle

    def outputs(self) -> tuple[list[str], list[str] | None]:
        written = [f for f in (self.language_field, self.score_field, self.script_field) if f]
        return ["data"], [PASSTHROUGH, *written]

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        super().setup(worker_metadata)
        if not self.model_path:
            _cld2.detect  # noqa: B018 - import pycld2 once per worker, before the first task
        elif self._model is None:
            from curator_slurm.stages.filters.classifiers import LABEL_PREFIX, load_model

            assert self.model_path is not None
            model = load_model(self.model_path, "LanguageFilter")
            labels = {label.removeprefix(LABEL_PREFIX).lower() for label in model.labels}
            missing = [code for code in self.languages or [] if code not in labels]
            if missing:
                raise ValueError(
                    f"LanguageFilter(languages={missing}): not labels of {self.model_path}; it has "
                    f"{sorted(labels)[:20]}{' ...' if len(labels) > 20 else ''}"
                )
            self._model = model

    def keep_mask(self, codes: pa.Array, scores: pa.Array) -> pa.Array:
        """Which documents to keep, from their codes and scores (CLD2's rule)."""
        if self.label_only:
            keep = pa.array(np.ones(len(codes), dtype=bool))
        else:
            keep = call("greater_equal", scores, self.min_score)
            if self.languages is not None:
                lowered = call("utf8_lower", codes)
                keep = call("and", keep, is_in(lowered, pa.array(self.languages, pa.string())))
        return call("invert", keep) if self.invert else keep

    def _fasttext(self, texts: pa.ChunkedArray) -> tuple[dict[str, pa.Array], pa.Array]:
        """(columns, keep) with datatrove's rule (see the class docstring)."""
        from curator_slurm.stages.filters.classifiers import LABEL_PREFIX, language_scores

        self.setup()
        best, top, matrix = language_scores(self._model, [t or "" for t in texts.to_pylist()], str(self.model_path))
        labels = [label.removeprefix(LABEL_PREFIX) for label in self._model.labels]
        listed = list(range(len(labels)))
        if self.languages is not None:
            wanted = set(self.languages)
            listed = [i for i, label in enumerate(labels) if label.lower() in wanted]
        keep: np.ndarray
        if self.label_only:
            keep = np.ones(len(best), dtype=bool)
        elif self.languages is None:
            keep = top > self.language_threshold
        else:
            keep = np.any(matrix[:, listed] > self.language_threshold, axis=1)
        if self.invert:
            keep = ~keep
        columns: dict[str, pa.Array] = {}
        if self.backend == "glotlid":  # datatrove splits the label at its "_": language, then script
            pairs = [label.split("_", 1) if "_" in label else [label, None] for label in best]
            best = [pair[0] or "" for pair in pairs]
            if self.script_field:
                columns[self.script_field] = pa.array([pair[1] for pair in pairs], pa.string())
        if self.language_field:
            columns[self.language_field] = pa.array(best, pa.string())
        if self.score_field:
            columns[self.score_field] = pa.array(top, pa.float64())
        if self.keep_top_pairs_threshold != -1:
            above = matrix > self.keep_top_pairs_threshold
            for i in listed:
                if above[:, i].any():
                    columns[top_pair_field(labels[i])] = pa.array(matrix[:, i], pa.float64(), mask=~above[:, i])
        return columns, pa.array(keep)

    def texts(self, task: DocumentBatch) -> pa.ChunkedArray:
        table = task.data
        if self.text_field not in table.column_names:
            where = task.where()
            raise InputError(
                f"{where}: no field {self.text_field!r} to identify the language of; the data has "
                f"{table.column_names}. Set text_field= to one of them."
            )
        return table.column(self.text_field)

    def decide(self, texts: pa.ChunkedArray, task: DocumentBatch) -> Decision:
        if self.backend in FASTTEXT_BACKENDS:
            columns, keep = self._fasttext(texts)
            return Decision(keep, columns=columns)
        codes, scores = detect_languages(texts, self.best_effort)
        keep = self.keep_mask(codes, scores)
        columns = {f: v for f, v in ((self.language_field, codes), (self.score_field, scores)) if f}
        return Decision(keep, columns=columns)


def top_pair_field(label: str) -> str:
    """The column of a label's score with ``keep_top_pairs_threshold`` (datatrove's metadata key)."""
    return f"top_language_{label}_score"

"""fastText classifiers as stages, with a model file the user provides (never downloaded): the prediction step
(:func:`language_scores`) and datatrove's and NeMo Curator's classifier filters. Design: docs/design.md, Filters."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from curator_slurm.errors import InputError
from curator_slurm.extras import load
from curator_slurm.stages.base import PASSTHROUGH
from curator_slurm.stages.filters.decide import BaseFilter, Decision
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.tasks import DocumentBatch

LABEL_PREFIX = "__label__"
#: datatrove's ``filter_mode`` values that this stage implements (datatrove's ``SENTENCE`` and ``WORDS``
#: need its sentence and word tokenizers).
DOCUMENT = "DOCUMENT"
PARAGRAPH = "PARAGRAPH"
FILTER_MODES = (DOCUMENT, PARAGRAPH)


def check_model_file(model_path: str | os.PathLike, feature: str) -> str:
    """``model_path`` as a string, or an error naming the file and the fix when there is no such file."""
    path = os.fspath(model_path)
    if not os.path.isfile(path):
        raise InputError(
            f"{feature}(model_path={path!r}): no such file. fastText models are never downloaded at run time: "
            "download or train the model (e.g. lid.176.bin from "
            "https://fasttext.cc/docs/en/language-identification.html) onto a filesystem every worker sees, "
            "and pass its path"
        )
    return path


def load_model(path: str, feature: str) -> Any:
    """The fastText model in ``path`` (its own loader, without ``fasttext.load_model``'s warning)."""
    module = load("fasttext.FastText", feature, "fasttext")
    try:
        return module._FastText(model_path=path)
    except ValueError as e:
        raise InputError(f"{feature}: {path!r} is not a fastText model the installed fasttext can read ({e})") from e


def predict(
    model: Any, lines: list[str], k: int = -1, model_path: str = "the model"
) -> tuple[list[tuple[str, ...]], list[np.ndarray]]:
    """fastText's labels and probabilities for each line (no line may hold a newline), best first."""
    if not lines:
        return [], []
    try:
        return model.predict(lines, k=k)
    except RuntimeError as e:
        if "NaN" not in str(e):
            raise
        raise InputError(
            f"fastText computed NaN for a document of this batch ({e}): {model_path} holds NaN or infinite weights "
            "(its training diverged; retrain it, e.g. with a lower lr, and check it predicts on a few texts)"
        ) from e


def label_matrix(labels: Sequence[str], predicted: list[tuple[str, ...]], probs: list[np.ndarray]) -> np.ndarray:
    """An (n, len(labels)) float64 matrix of each line's probability of each label (0 where not returned)."""
    index = {label: i for i, label in enumerate(labels)}
    out = np.zeros((len(predicted), len(labels)), dtype=np.float64)
    if not predicted:
        return out
    counts = np.fromiter((len(names) for names in predicted), np.int64, len(predicted))
    columns = np.fromiter((index[name] for names in predicted for name in names), np.int64, int(counts.sum()))
    out[np.repeat(np.arange(len(predicted)), counts), columns] = np.concatenate(probs)
    return out


def language_scores(
    model: Any, texts: list[str], model_path: str = "the model"
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """What datatrove's ft176 language identifier computes, for a list of texts: newlines become spaces,
    every label is scored (``k=-1``); the best label (without ``__label__``) and its score, and the full
    (n, labels) matrix in ``model.labels`` order."""
    predicted, probs = predict(model, [t.replace("\n", " ") for t in texts], model_path=model_path)
    best = [names[0].removeprefix(LABEL_PREFIX) if names else "" for names in predicted]
    top = np.array([float(p[0]) if len(p) else 0.0 for p in probs], dtype=np.float64)
    return best, top, label_matrix(model.labels, predicted, probs)


def _texts(task: DocumentBatch, field: str, feature: str) -> list[str]:
    table = task.data
    if field not in table.column_names:
        where = task.where()
        raise InputError(
            f"{where}: no field {field!r} for {feature} to classify; the data has {table.column_names}. "
            "Set text_field= to one of them."
        )
    return [t or "" for t in table.column(field).to_pylist()]


def paragraphs(text: str) -> list[str]:
    """datatrove's paragraph units: the text's lines, each blank line joined to the line before it, each
    unit keeping its newline, so that joining the units gives the text back (but for a final newline)."""
    lines = text.splitlines()
    units: list[str] = []
    current: list[str] = []
    for i, line in enumerate(lines):
        if line.strip() and current:
            units.append("".join(current))
            current = []
        current.append(line)
        if i != len(lines) - 1:
            current.append("\n")
    if current:
        units.append("".join(current))
    return units


def _label_rules(value: Any, parameter: str) -> list[tuple[str, float]] | None:
    """``("hq", 0.9)`` or a list of such pairs, as a list of (label without ``__label__``, min score)."""
    if not value:
        return None
    pairs = [value] if isinstance(value[0], str) else list(value)
    out = []
    for pair in pairs:
        if len(pair) != 2 or not isinstance(pair[0], str):
            raise ValueError(f"FastTextClassifierFilter({parameter}={value!r}): give (label, min score) pairs")
        out.append((pair[0].removeprefix(LABEL_PREFIX), float(pair[1])))
    return out


class FastTextClassifierFilter(BaseFilter):
    """datatrove's ``FastTextClassifierFilter``: classify each document (or each paragraph) with a fastText
    model and keep it when **at least one** of ``keep_labels`` has a score at or above its minimum, or when
    **none** of ``remove_labels`` does (give one of the two, or neither to only score).

    Before predicting, each unit (document or paragraph) is stripped and its newlines replaced. In paragraph
    mode only the paragraphs that pass are kept (the text is rewritten) and the documents left blank dropped;
    in document mode a blank text is dropped, as datatrove does.

    Args:
        model_path: the fastText model file; never downloaded.
        keep_labels: ``("hq", 0.9)`` or a list of (label without ``__label__``, min score) pairs, each one of the
            model's labels (checked when the model loads).
        remove_labels: the same, for labels that remove a document (not with ``keep_labels``).
        save_labels_in_metadata: write each of the model's labels as a float64 column named as datatrove names
            the metadata key (``__label__hq``), the mean over the units in paragraph mode.
        newline_replacement: what a unit's newlines become before predicting (datatrove's default ``""``).
        filter_mode: ``"DOCUMENT"`` or ``"PARAGRAPH"``.
        text_field: the field classified.
        exclusion_writer: a writer for the removed documents, their text as it came in (None: none).
    """

    requires = ("fasttext",)

    name = "fasttext_classifier_filter"
    fingerprint_exclude = frozenset({"_model"})  # loaded by setup(); model_path says which

    def __init__(
        self,
        model_path: str | os.PathLike,
        keep_labels: tuple[str, float] | list[tuple[str, float]] | None = None,
        remove_labels: tuple[str, float] | list[tuple[str, float]] | None = None,
        save_labels_in_metadata: bool = True,
        newline_replacement: str = "",
        filter_mode: str = DOCUMENT,
        text_field: str = "text",
        exclusion_writer: BaseWriter | None = None,
    ) -> None:
        if keep_labels and remove_labels:
            raise ValueError("FastTextClassifierFilter: give keep_labels or remove_labels, not both (use two filters)")
        if filter_mode not in FILTER_MODES:
            raise ValueError(f"FastTextClassifierFilter(filter_mode={filter_mode!r}): one of {FILTER_MODES}")
        self.model_path = check_model_file(model_path, "FastTextClassifierFilter")
        self.keep_labels = _label_rules(keep_labels, "keep_labels")
        self.remove_labels = _label_rules(remove_labels, "remove_labels")
        self.save_labels_in_metadata = save_labels_in_metadata
        self.newline_replacement = newline_replacement
        self.filter_mode = filter_mode
        super().__init__(exclusion_writer, text_field)
        self._model: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_model": None}  # a loaded model does not pickle: each worker loads its own

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], None if self.save_labels_in_metadata else [PASSTHROUGH]  # the labels are the model's

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        super().setup(worker_metadata)
        if self._model is not None:
            return
        model = load_model(self.model_path, "FastTextClassifierFilter")
        available = [label.removeprefix(LABEL_PREFIX) for label in model.labels]
        for label, _ in (self.keep_labels or []) + (self.remove_labels or []):
            if label not in available:
                raise ValueError(
                    f"FastTextClassifierFilter: label {label!r} (keep_labels/remove_labels) is not a label of "
                    f"{self.model_path}; its labels are {available}"
                )
        self._model = model

    def _passes(self, scores: np.ndarray, labels: list[str]) -> np.ndarray:
        """datatrove's rule on an (units, labels) score matrix: any keep label at or above its minimum, or no
        remove label at or above its minimum."""
        index = {label.removeprefix(LABEL_PREFIX): i for i, label in enumerate(labels)}
        rules = self.keep_labels or self.remove_labels or []
        hit = np.zeros(len(scores), dtype=bool)
        for label, minimum in rules:
            hit |= scores[:, index[label]] >= minimum
        return hit if self.keep_labels else ~hit

    def texts(self, task: DocumentBatch) -> list[str]:
        return _texts(task, self.text_field, "FastTextClassifierFilter")

    def counted_texts(self, task: DocumentBatch, texts: Any) -> pa.ChunkedArray:
        return task.data.column(self.text_field)

    def decide(self, texts: list[str], task: DocumentBatch) -> Decision:
        self.setup()
        labels = list(self._model.labels)
        units = [[t] for t in texts] if self.filter_mode == DOCUMENT else [paragraphs(t) for t in texts]
        flat = [u.strip().replace("\n", self.newline_replacement) for doc in units for u in doc]
        scores = label_matrix(labels, *predict(self._model, flat, model_path=self.model_path))
        passes = self._passes(scores, labels)
        counts = np.array([len(doc) for doc in units], dtype=np.int64)
        rewritten = None
        if self.filter_mode == PARAGRAPH:
            starts = np.cumsum(counts) - counts  # each document's first unit (an empty batch has none)
            kept = [
                "".join(u for u, ok in zip(doc, passes[s : s + len(doc)], strict=True) if ok)
                for doc, s in zip(units, starts, strict=True)
            ]
            rewritten = pa.array(kept, pa.string())
        else:
            kept = [t if ok else "" for t, ok in zip(texts, passes, strict=True)]
        columns: dict[str, pa.Array] = {}
        if self.save_labels_in_metadata:
            owner = np.repeat(np.arange(len(texts)), counts)
            sums = np.zeros((len(texts), len(labels)))
            np.add.at(sums, owner, scores)
            means = sums / np.maximum(counts, 1)[:, None]
            blank = counts == 0  # no unit to score (an empty text in paragraph mode): null, as datatrove has no key
            for i, label in enumerate(labels):
                columns[label] = pa.array(means[:, i], pa.float64(), mask=blank)
        keep = np.array([bool(t.strip()) for t in kept], dtype=bool)
        return Decision(keep, texts=rewritten, columns=columns)


def _uniform(texts: list[str], seed: int) -> np.ndarray:
    """One draw in (0, 1) per text, a fixed function of (seed, text): a document's draw does not depend on
    its batch, its shard or the order documents reach a worker."""
    bits = np.array([xxhash.xxh64_intdigest(t.encode("utf-8", "surrogatepass"), seed) >> 11 for t in texts], np.float64)
    return (bits + 0.5) / float(1 << 53)


class FastTextQualityFilter(BaseFilter):
    """NeMo Curator's ``FastTextQualityFilter``: the score of a document is the model's probability of
    ``label`` (``1 - p`` when another label is the most likely one), computed on the text with newlines and
    ``__label__`` made spaces, top label only; the document is kept when a Pareto(``alpha``) draw exceeds
    ``1 - score`` (so a score s is kept with probability ``(2 - s) ** -alpha``: always near 1, 1/8 at 0 for
    alpha 3), as GPT-3's quality filter did. The score is written to ``score_field``.

    One difference, for reproducibility: NeMo draws from numpy's global generator seeded once per process, so
    which documents survive depends on the order they reach each worker; here each document's draw is a
    fixed function of ``seed`` and its text (the Pareto variate by inverting its CDF), so the same documents
    survive in every shard layout, with NeMo's keep probability for every score.

    Args:
        model_path: the fastText model file; never downloaded.
        label: the label whose probability is the score.
        alpha: the Pareto shape (> 0).
        seed: the seed of every document's draw.
        text_field: the field classified.
        score_field: the column of the score (None: not written).
        exclusion_writer: a writer for the removed documents, with their score (None: none).
    """

    requires = ("fasttext",)

    name = "fasttext_quality_filter"
    fingerprint_exclude = frozenset({"_model"})  # loaded by setup(); model_path says which

    def __init__(
        self,
        model_path: str | os.PathLike,
        label: str = "__label__hq",
        alpha: float = 3,
        seed: int = 42,
        text_field: str = "text",
        score_field: str | None = "fasttext_quality_score",
        exclusion_writer: BaseWriter | None = None,
    ) -> None:
        if alpha <= 0:
            raise ValueError(f"FastTextQualityFilter(alpha={alpha}): the Pareto shape must be > 0")
        self.model_path = check_model_file(model_path, "FastTextQualityFilter")
        self.label = label
        self.alpha = float(alpha)
        self.seed = int(seed)
        super().__init__(exclusion_writer, text_field)
        self.score_field = score_field
        self._model: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_model": None}

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, *([self.score_field] if self.score_field else [])]

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        super().setup(worker_metadata)
        if self._model is None:
            model = load_model(self.model_path, "FastTextQualityFilter")
            if self.label not in model.labels:
                raise ValueError(
                    f"FastTextQualityFilter(label={self.label!r}) is not a label of {self.model_path}; "
                    f"its labels are {list(model.labels)}"
                )
            self._model = model

    def scores(self, texts: list[str]) -> np.ndarray:
        """NeMo's score of each text (see the class docstring)."""
        lines = [t.replace("\n", " ").replace(LABEL_PREFIX, " ") for t in texts]
        predicted, probs = predict(self._model, lines, k=1, model_path=self.model_path)
        top = np.array([float(p[0]) for p in probs], dtype=np.float64)
        is_label = np.array([names[0] == self.label for names in predicted], dtype=bool)
        return np.where(is_label, top, 1.0 - top)

    def texts(self, task: DocumentBatch) -> list[str]:
        return _texts(task, self.text_field, "FastTextQualityFilter")

    def counted_texts(self, task: DocumentBatch, texts: Any) -> pa.ChunkedArray:
        return task.data.column(self.text_field)

    def decide(self, texts: list[str], task: DocumentBatch) -> Decision:
        self.setup()
        scores = self.scores(texts)
        pareto = _uniform(texts, self.seed) ** (-1.0 / self.alpha) - 1.0  # Lomax, numpy's pareto(alpha)
        columns = {self.score_field: pa.array(scores, pa.float64())} if self.score_field else {}
        return Decision(pareto > 1.0 - scores, columns=columns)


__all__ = ["FastTextClassifierFilter", "FastTextQualityFilter", "language_scores", "paragraphs"]

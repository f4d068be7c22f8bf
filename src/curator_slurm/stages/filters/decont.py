"""datatrove's n-gram decontamination: :class:`NGramsDecontIndexer` hashes the n-grams of evaluation texts given as a
list or a JSONL file, :class:`NGramsDecontFilter` drops the documents holding one. Design: docs/design.md, Filters."""

from __future__ import annotations

import hashlib
import json
import re
import struct
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import xxhash

from curator_slurm import fs
from curator_slurm.errors import InputError
from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage
from curator_slurm.stages.filters.decide import BaseFilter, Decision
from curator_slurm.stages.io.writers import BaseWriter, output_stem
from curator_slurm.stages.text.spacy_words import words
from curator_slurm.stages.text.split import PUNCTUATION_SET, TERMINAL_PUNCTUATION
from curator_slurm.tasks import DocumentBatch

#: The suffix of an index file, one per task: its n-gram hashes as little-endian unsigned integers (datatrove's).
INDEX_SUFFIX = ".index.hashes"


@dataclass(frozen=True)
class TextNormConfig:
    """How texts are simplified before they are split into words (datatrove's ``TextNormConfig``)."""

    lowercase: bool = True
    norm_whitespace: bool = True
    remove_punctuation: bool = True
    norm_unicode_diacritics: bool = True
    norm_numbers: bool = True
    norm_weekdays: bool = False
    norm_monthnames: bool = False


@dataclass(frozen=True)
class HashConfig:
    """The n-gram hash (datatrove's ``HashConfig``): 32 or 64 bits of xxHash or SHA-1."""

    precision: Literal[32, 64] = 64
    hash_fc: Literal["sha1", "xxhash"] = "xxhash"

    @property
    def np_dtype(self) -> Any:
        return np.dtype("<u4") if self.precision == 32 else np.dtype("<u8")


@dataclass(frozen=True)
class NGramsDecontConfig:
    """What counts as contamination (datatrove's ``NGramsDecontConfig``): every ``n_grams``-gram of a label
    (the gold answer); with ``find_query_ngrams`` those of its query (the prompt) too; with
    ``find_overlap_ngrams`` those that span the end of the query and the start of the label."""

    n_grams: int = 12
    find_query_ngrams: bool = False
    find_overlap_ngrams: bool = True
    norm_config: TextNormConfig = field(default_factory=TextNormConfig)
    hash_config: HashConfig = field(default_factory=HashConfig)


# datatrove's PUNCTUATION: its punctuation set less the sentence terminals it does not list itself.
_LISTED_TERMINALS = {c for c in TERMINAL_PUNCTUATION if c in "!.?\u3002\uff01\uff0e\uff1f"}
_PUNCTUATION = "".join(sorted((PUNCTUATION_SET - TERMINAL_PUNCTUATION) | _LISTED_TERMINALS))
_PUNCTUATION_TRANS = str.maketrans(_PUNCTUATION, " " * len(_PUNCTUATION))
# \d: any Unicode decimal digit, as datatrove's \p{Nd}.
_NUMBERS = re.compile(r"\d+([.,\u060c\u066b\u2396\u2397\u2398]\d+)?")
_WHITESPACE = re.compile(r"\s+")
_WEEKDAYS = re.compile(r"monday|tuesday|wednesday|thursday|friday|saturday|sunday")
_MONTHS = re.compile(r"january|february|march|april|may|june|july|august|september|october|november|december")


def simplify_text(text: str, config: TextNormConfig) -> str:
    """``text`` simplified as datatrove's ``simplify_text`` does, in its order."""
    if config.lowercase:
        text = text.lower()
    if config.norm_numbers:
        text = _NUMBERS.sub("0", text)
    if config.norm_weekdays:
        text = _WEEKDAYS.sub("WEEKDAY", text)
    if config.norm_monthnames:
        text = _MONTHS.sub("MONTH", text)
    if config.remove_punctuation:
        text = text.translate(_PUNCTUATION_TRANS)
    if config.norm_whitespace:
        text = _WHITESPACE.sub(" ", text.strip())
    if config.norm_unicode_diacritics:
        text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    return text.strip()


def hash_func(config: HashConfig) -> Any:
    """The function from an n-gram (its words joined by spaces) to its hash."""
    if config.hash_fc == "xxhash":
        digest = xxhash.xxh32_intdigest if config.precision == 32 else xxhash.xxh64_intdigest
        return lambda s: digest(s.encode("utf-8"))
    if config.hash_fc == "sha1":
        fmt, size = ("<I", 4) if config.precision == 32 else ("<Q", 8)
        return lambda s: struct.unpack(fmt, hashlib.sha1(s.encode("utf-8")).digest()[:size])[0]
    raise ValueError(f"HashConfig(hash_fc={config.hash_fc!r}): give 'xxhash' or 'sha1'")


def _check_language(owner: str, language: str) -> None:
    if language not in ("en", "eng"):
        raise ValueError(f"{owner}(language={language!r}): only English ('en') words are supported")


def word_lists(texts: list[str], config: TextNormConfig) -> list[list[str]]:
    """Each text's words as datatrove's English word tokenizer gives them for its simplified text."""
    found = words(pa.array([simplify_text(t, config) for t in texts], pa.large_string()))
    return [found.texts(r) for r in range(len(texts))]


def _ngrams(tokens: list[str], n: int) -> list[str]:
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def eval_ngrams(config: NGramsDecontConfig, label: list[str], query: list[str] | None) -> list[str]:
    """The n-grams datatrove indexes for a label and its query (None: no query)."""
    n = config.n_grams
    found = _ngrams(label, n)
    if query is not None:
        if config.find_query_ngrams:
            found.extend(_ngrams(query, n))
        if config.find_overlap_ngrams:
            for i in range(n - 1):
                if len(query) >= n - 1 - i and len(label) >= i + 1:
                    found.append(" ".join(query[len(query) - (n - 1 - i) :] + label[: i + 1]))
    return found


@dataclass(frozen=True)
class EvalText:
    """One evaluation item: ``text`` the label (gold answer), ``query`` its prompt, ``task`` its task's name."""

    text: str
    query: str | None = None
    task: str = "input"


def read_eval_texts(
    texts: Iterable[str | Mapping[str, Any] | EvalText] | None, texts_file: str | None
) -> list[EvalText]:
    """The evaluation items of a list (strings, mappings with ``text``, ``query``, ``task``) and a JSONL file."""
    rows: list[Any] = list(texts or [])
    if texts_file is not None:
        for number, line in enumerate(fs.read_bytes(texts_file).decode("utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise InputError(f"{texts_file}:{number}: not a JSON object ({e})") from e
    out = []
    for row in rows:
        if isinstance(row, EvalText):
            out.append(row)
        elif isinstance(row, str):
            out.append(EvalText(row))
        elif isinstance(row, Mapping) and isinstance(row.get("text"), str):
            out.append(EvalText(row["text"], row.get("query"), str(row.get("task") or "input")))
        else:
            raise InputError(f"evaluation text {row!r}: give a string or an object with a 'text' field")
    return out


def index_hashes(items: list[EvalText], config: NGramsDecontConfig) -> dict[str, np.ndarray]:
    """Each task's sorted distinct n-gram hashes."""
    labels = word_lists([i.text for i in items], config.norm_config)
    queries = word_lists([i.query or "" for i in items], config.norm_config)
    hasher = hash_func(config.hash_config)
    per_task: dict[str, set[int]] = {}
    for item, label, query in zip(items, labels, queries, strict=True):
        grams = eval_ngrams(config, label, query if item.query is not None else None)
        per_task.setdefault(item.task, set()).update(map(hasher, grams))
    dtype = config.hash_config.np_dtype
    return {task: np.array(sorted(h), dtype=dtype) for task, h in per_task.items()}


def write_index(folder: str, hashes: dict[str, np.ndarray]) -> list[str]:
    """Each task's hashes published whole as ``<folder>/<task>.index.hashes``; the paths written."""
    fs.makedirs(folder)
    paths = []
    for task, array in sorted(hashes.items()):
        path = fs.join(folder, f"{task.replace(' ', '_').replace('/', '_')}{INDEX_SUFFIX}")
        data = array.tobytes()
        fs.atomic_write(path, lambda f, data=data: f.write(data))  # type: ignore[misc]
        paths.append(path)
    return paths


def index_files(folder: str) -> list[str]:
    """The index files of ``folder`` and of its subfolders (one per source task of a pipeline-built index)."""
    if not fs.exists(folder):
        return []
    listing = fs.list_tree([folder], (f"*{INDEX_SUFFIX}",))
    return sorted(p for p in listing.files if not fs.basename(p).startswith("."))


class NGramsDecontIndexer(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Builds a decontamination index: the hashes of the evaluation texts' n-grams, one file per task
    (datatrove's ``NGramsDecontIndexer``). Call :meth:`run` for the ``texts``/``texts_file`` given here; in a
    pipeline, each batch's rows (``text`` the label, ``query`` and ``task`` fields when present) are indexed
    into ``<output_folder>/<source task>/`` and the batch goes on.

    Args:
        output_folder: where the index files go.
        texts: evaluation items: strings (labels) or mappings with ``text``, ``query`` and ``task``.
        texts_file: a JSONL file of such mappings.
        config: the n-gram size and which n-grams count (datatrove's defaults).
        language: the word tokenizer's language (English only).
    """

    def __init__(
        self,
        output_folder: str,
        texts: Iterable[str | Mapping[str, Any]] | None = None,
        texts_file: str | None = None,
        config: NGramsDecontConfig | None = None,
        language: str = "en",
    ) -> None:
        _check_language("NGramsDecontIndexer", language)
        self.output_folder = output_folder
        self.config = config or NGramsDecontConfig()
        self.language = language
        self.texts_file = texts_file
        self.texts = read_eval_texts(texts, None)

    def run(self) -> list[str]:
        """Writes the index of ``texts`` and ``texts_file`` (the same bytes on a re-run); the files written."""
        items = self.texts + read_eval_texts(None, self.texts_file)
        if not items:
            raise InputError("NGramsDecontIndexer: no evaluation texts: give texts= or texts_file=")
        return write_index(self.output_folder, index_hashes(items, self.config))

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], ["text"]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def output_dirs(self) -> list[str]:
        return [self.output_folder]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        rows = task.data.to_pylist()
        items = [EvalText(r.get("text") or "", r.get("query"), str(r.get("task") or "input")) for r in rows]
        if items:
            write_index(fs.join(self.output_folder, output_stem(task)), index_hashes(items, self.config))
        return task


class NGramsDecontFilter(BaseFilter):
    """Drops a document holding an n-gram of the index in ``index_folder`` (datatrove's ``NGramsDecontFilter``):
    reason ``contaminated``, its excluded row naming the first such n-gram (``contaminated_ngram``) and its
    task (``contaminated_task``). The index's digest is part of the run fingerprint.

    Args:
        index_folder: where :class:`NGramsDecontIndexer` wrote the index.
        config: as the indexer's (its n-gram size, normalisation and hash).
        exclusion_writer: where the removed documents go, with their reason (None: nowhere).
        language: the word tokenizer's language (English only).
        text_field: the field searched.
    """

    fingerprint_exclude = frozenset({"_index"})

    def __init__(
        self,
        index_folder: str,
        config: NGramsDecontConfig | None = None,
        exclusion_writer: BaseWriter | None = None,
        language: str = "en",
        text_field: str = "text",
    ) -> None:
        super().__init__(exclusion_writer, text_field)
        _check_language("NGramsDecontFilter", language)
        self.index_folder = index_folder
        self.config = config or NGramsDecontConfig()
        self.language = language
        self.index_digest = self._digest()
        self._index: dict[int, str] | None = None

    def _digest(self) -> str:
        files = index_files(self.index_folder)
        if not files:
            raise InputError(
                f"NGramsDecontFilter: no *{INDEX_SUFFIX} files in {self.index_folder}: build the index first"
            )
        h = xxhash.xxh64()
        for path in files:
            h.update(fs.basename(path).encode("utf-8") + b"\0")
            h.update(xxhash.xxh64_digest(fs.read_bytes(path)))
        return h.hexdigest()

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        super().setup(worker_metadata)
        self._load()

    def _load(self) -> dict[int, str]:
        if self._index is None:
            if self._digest() != self.index_digest:
                raise InputError(
                    f"NGramsDecontFilter: the index in {self.index_folder} changed since the filter was made"
                )
            index: dict[int, str] = {}
            dtype = self.config.hash_config.np_dtype
            for path in index_files(self.index_folder):
                task = fs.basename(path).removesuffix(INDEX_SUFFIX)
                for value in np.frombuffer(fs.read_bytes(path), dtype=dtype).tolist():
                    index[value] = task
            self._index = index
        return self._index

    def decide(self, texts: Any, task: DocumentBatch) -> Decision:
        index = self._load()
        hasher = hash_func(self.config.hash_config)
        rows = len(texts)
        keep = np.ones(rows, dtype=bool)
        reasons: list[str | None] = [None] * rows
        grams: list[str | None] = [None] * rows
        tasks: list[str | None] = [None] * rows
        for r, tokens in enumerate(word_lists(texts.to_pylist(), self.config.norm_config)):
            for gram in _ngrams(tokens, self.config.n_grams):
                found = index.get(hasher(gram))
                if found is not None:
                    keep[r], reasons[r], grams[r], tasks[r] = False, "contaminated", gram, found
                    break
        details = {
            "contaminated_ngram": pa.array(grams, pa.string()),
            "contaminated_task": pa.array(tasks, pa.string()),
        }
        return Decision(keep, reasons, details=details)


__all__ = ["HashConfig", "NGramsDecontConfig", "NGramsDecontFilter", "NGramsDecontIndexer", "TextNormConfig"]

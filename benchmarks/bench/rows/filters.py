"""Rows h1-h24: each heuristic filter's column API against the same filter per document in Python."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

import pyarrow as pa

from ..context import Bench
from ..harness import BenchError, Measure, Row, progress, rotated

#: Row "h": each heuristic filter, and the words of the vocabulary its web-like documents are made of.
_WEB_WORDS = [
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", "you", "were", "her",
    "she", "there", "one", "all", "we", "their", "can", "has", "been", "if", "more", "when", "will", "would", "who",
    "so", "no", "data", "system", "people", "time", "year", "way", "day", "man", "thing", "woman", "life", "child",
    "world", "school", "state", "family", "student", "group", "country", "problem", "hand", "part", "place", "case",
    "week", "company", "number", "point", "government", "night", "water", "room",
]  # fmt: skip
#: Why a filter's column API cannot be 5x its per-document Python, where that is so (the row's note).
_FILTER_LIMITS = {
    "UrlsFilter": "per document it is one C regex search that finds nothing in most texts; the column runs "
    "the same regex (RE2) on the texts containing '://'",
    "PornographicUrlsFilter": "per document one C regex search; the column checks for 'porn' first",
    "SubstringFilter": "per document one C call (str.__contains__)",
    "WordCountFilter": "per document str.split() is one C call",
    "RepeatedLinesFilter": "per document split and set are C calls on few lines",
    "RepeatedParagraphsFilter": "per document split and set are C calls on few paragraphs",
    "RepeatedLinesByCharFilter": "per document split and set are C calls on few lines",
    "RepeatedParagraphsByCharFilter": "per document split and set are C calls on few paragraphs",
    "BulletsFilter": "per document a split and a few startswith calls per line",
    "PunctuationFilter": "per document a split and one endswith call per line",
    "EllipsisFilter": "per document a split and one endswith call per line",
    "RepeatingTopNGramsFilter": "n-gram identity needs hashing every n-gram of the column, and the top "
    "n-gram's occurrences are counted with str.count per document",
    "RepeatingDuplicateNGramsFilter": "n-gram identity needs hashing every n-gram of the column",
    "SymbolsToWordsFilter": "word boundaries take several passes over the bytes (whitespace, word starts and "
    "ends, lengths in characters) and an ellipsis-word comparison; per document str.split is one C call",
    "LongWordFilter": "word boundaries and lengths in characters take several passes over the bytes; per "
    "document str.split and len are C calls",
    "WordsWithoutAlphabetsFilter": "word boundaries take several passes over the bytes",
    "CommonEnglishWordsFilter": "per document the count stops at the cutoff, usually within the first words; "
    "the column looks at every word",
    "BoilerPlateStringFilter": "the texts that mention privacy, cookies or terms of use are lower-cased and "
    "split into paragraphs; per document lower() and 'in' are C calls",
    "MeanWordLengthFilter": "per document str.split is one C call",
}


def web_like_texts(count: int, seed: int = 0) -> list[str]:
    """Deterministic English web-like documents: paragraphs of sentences, navigation menus at the top
    and bottom, bullet lists, links, cookie notices, numbers, curly quotes and brackets."""
    rng = random.Random(seed)

    def sentence() -> str:
        words = [rng.choice(_WEB_WORDS) for _ in range(rng.randint(5, 22))]
        if rng.random() < 0.1:
            words.insert(rng.randrange(len(words)), str(rng.randint(1, 2030)))
        if rng.random() < 0.05:
            words.insert(rng.randrange(len(words)), "\u201cquoted\u201d")
        if rng.random() < 0.05:
            words.insert(rng.randrange(len(words)), "(see below)")
        text = " ".join(words)
        return text[0].upper() + text[1:] + rng.choice([".", ".", ".", "?", "!", "...", ":", ""])

    texts = []
    for _ in range(count):
        parts = ["Home | News | Sport | Contact"] if rng.random() < 0.3 else []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.1:
                parts.append("\n".join(f"\u2022 {sentence()}" for _ in range(rng.randint(2, 5))))
            elif r < 0.15:
                parts.append(f"Read more at https://www.example.com/{rng.randint(1, 9999)}/{rng.choice(_WEB_WORDS)}")
            elif r < 0.18:
                parts.append("This website uses cookies. See our privacy policy and terms of use.")
            else:
                parts.append(" ".join(sentence() for _ in range(rng.randint(1, 6))))
        if rng.random() < 0.3:
            parts.append("Home | News | Sport | Contact")
        texts.append("\n\n".join(parts))
    return texts


def bench_filters(b: Bench) -> list[Row]:
    """Rows h1-h24: MB/s of each heuristic filter's column API (score_array + keep_array, as ScoreFilter
    runs it) against the same filter as a plain Python function per document (score_document +
    keep_document over Python strings, NeMo Curator's style), on one core, on web-like English text.

    The value compares the fastest sample of each side, as row 5 does: a sample takes a fraction of a
    second, and on a shared machine noise only ever adds time."""
    from curator_slurm.stages import filters as filter_module

    texts = web_like_texts(1000 if b.quick else 20000)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    column = pa.chunked_array([pa.array(texts, pa.string())])
    names = (*filter_module.NEMO_HEURISTIC_FILTERS, "SymbolRatioFilter")
    rows = []
    for i, name in enumerate(names, start=1):
        cls = getattr(filter_module, name)
        f = cls("the", "any") if name == "SubstringFilter" else cls()
        vectorised: list[float] = []
        python: list[float] = []

        def time_column(f: Any = f, out: list[float] = vectorised) -> None:
            start = time.perf_counter()
            f.keep_array(f.score_array(column))
            out.append(mb / (time.perf_counter() - start))

        def time_python(f: Any = f, out: list[float] = python) -> None:
            start = time.perf_counter()
            _ = [f.keep_document(f.score_document(t)) for t in texts]
            out.append(mb / (time.perf_counter() - start))

        time_column()  # untimed warm-up: first calls build regexes and tables
        vectorised.clear()
        for rep in range(b.micro_repeat):  # short samples: more of them, alternating order
            for measure in rotated([time_column, time_python], rep):
                measure()
        if f.keep_array(f.score_array(column)).to_pylist() != [f.keep_document(f.score_document(t)) for t in texts]:
            raise BenchError(f"{name}: the column API and the per-document API keep different documents")
        progress(f"row h{i}: {name} {statistics.median(vectorised):.0f} vs {statistics.median(python):.0f} MB/s")
        row = Row(
            f"h{i}",
            f"{name}: column API / per-document Python, MB/s on one core ({mb:.0f} MB of web-like text)",
            Measure("column", "MB/s", vectorised),
            Measure("per document", "MB/s", python),
            ">=",
            5.0,
            value=max(vectorised) / max(python),
        )
        fastest = f"value from the fastest of {len(python)} samples of each side (medians in the table)"
        row.note = fastest if row.passed else f"{fastest}; {_FILTER_LIMITS.get(name, 'no reason recorded')}"
        rows.append(row)
    return rows

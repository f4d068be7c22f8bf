"""NeMo Curator's ``HistogramFilter`` (NLLB's cheap language check): the share of a text's characters found in
a character histogram of its language, from histogram files the user gives (nothing is downloaded)."""

from __future__ import annotations

import os

from .base import DocumentFilter

#: Where fairseq's ``histograms.tar.gz`` (of its m2m_100 example) puts each language's file, as NeMo reads it.
HISTOGRAM_PATH = ("histograms", "checkpoint", "edunov", "cc60_multilingual", "clean_hists")


class HistogramFilter(DocumentFilter):
    """Keep a text when more than ``threshold`` of its characters are in ``lang``'s histogram (score 1).

    The histograms are fairseq's (``histograms.tar.gz`` of its m2m_100 example, unpacked into ``cache_dir``),
    read from ``<cache_dir>/histograms/checkpoint/edunov/cc60_multilingual/clean_hists/<lang>`` as NeMo reads
    them: one character per line, up to the line starting with ``threshold_char``. NeMo downloads them when
    they are missing; here they must be there (a clear error says where).

    Args:
        lang: the expected language (the histogram file's name).
        threshold: the share of characters that must be in the histogram.
        cache_dir: the directory holding ``histograms/``.
        threshold_char: the character that ends a histogram.
    """

    name = "histogram"

    def __init__(
        self, lang: str = "en", threshold: float = 0.8, cache_dir: str = "", threshold_char: str = "]"
    ) -> None:
        self.lang = lang
        self.threshold = threshold
        self.cache_dir = cache_dir
        self.threshold_char = threshold_char
        path = os.path.join(cache_dir or ".", *HISTOGRAM_PATH, lang)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"HistogramFilter(lang={lang!r}): no histogram at {path}; unpack fairseq's m2m_100 histograms.tar.gz "
                "into cache_dir (this package downloads nothing)"
            )
        characters = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line[0] == threshold_char:
                    break
                characters.append(line[0])
        self.histogram = frozenset(characters)

    def score_document(self, text: str) -> int:
        if not text:  # an empty (or null) document has no characters to check (NeMo divides by zero)
            return 0
        count = sum(1 for c in text.strip() if c in self.histogram)
        return 1 if count / len(text) > self.threshold else 0

    def keep_document(self, score: float) -> bool:
        return score == 1


__all__ = ["HISTOGRAM_PATH", "HistogramFilter"]

"""Filters: the one contract (:mod:`.decide`), NeMo Curator's ``DocumentFilter`` (:mod:`.base`) with ``ScoreFilter``,
``Score`` and ``Filter`` (:mod:`.score`), NeMo's heuristic filters (one module per family under ``heuristic/``), code
filters (:mod:`.code`), TokenCountFilter and HistogramFilter, and this project's SymbolRatioFilter. Import them from
here. Design: docs/design.md, section Filters."""

from curator_slurm.stages.filters.heuristic import characters, lines, repetition, substrings, words
from curator_slurm.stages.filters.heuristic.characters import *  # noqa: F403
from curator_slurm.stages.filters.heuristic.lines import *  # noqa: F403
from curator_slurm.stages.filters.heuristic.repetition import *  # noqa: F403
from curator_slurm.stages.filters.heuristic.substrings import *  # noqa: F403
from curator_slurm.stages.filters.heuristic.words import *  # noqa: F403

from . import code
from .base import DocumentFilter
from .code import *  # noqa: F403
from .decide import BaseFilter, Decision, first_reason
from .histogram import HistogramFilter
from .score import Filter, Score, ScoreFilter
from .token import TokenCountFilter

#: NeMo Curator's heuristic filters of the string and repetition families, by class name.
NEMO_HEURISTIC_FILTERS = (
    "NonAlphaNumericFilter",
    "SymbolsToWordsFilter",
    "NumbersFilter",
    "UrlsFilter",
    "BulletsFilter",
    "WhiteSpaceFilter",
    "ParenthesesFilter",
    "LongWordFilter",
    "WordCountFilter",
    "BoilerPlateStringFilter",
    "MeanWordLengthFilter",
    "PunctuationFilter",
    "EllipsisFilter",
    "CommonEnglishWordsFilter",
    "WordsWithoutAlphabetsFilter",
    "PornographicUrlsFilter",
    "SubstringFilter",
    "RepeatedLinesFilter",
    "RepeatedParagraphsFilter",
    "RepeatedLinesByCharFilter",
    "RepeatedParagraphsByCharFilter",
    "RepeatingTopNGramsFilter",
    "RepeatingDuplicateNGramsFilter",
)

__all__ = [
    "NEMO_HEURISTIC_FILTERS",
    "BaseFilter",
    "Decision",
    "DocumentFilter",
    "Filter",
    "HistogramFilter",
    "Score",
    "ScoreFilter",
    "TokenCountFilter",
    "first_reason",
    *code.__all__,
    *characters.__all__,
    *lines.__all__,
    *repetition.__all__,
    *substrings.__all__,
    *words.__all__,
]

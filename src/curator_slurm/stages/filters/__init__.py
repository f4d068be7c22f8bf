"""Filters: one contract for all (:mod:`.decide`: ``BaseFilter`` decides for a batch, its base keeps, notes and
writes exclusions), NeMo Curator's ``DocumentFilter`` (:mod:`.base`) with its stages ``ScoreFilter``, ``Score``
and ``Filter`` (:mod:`.score`), NeMo's heuristic filters (same names, parameters, defaults and decisions) and
this project's own SymbolRatioFilter.

Each NeMo filter mirrors the class of the same name in NeMo Curator's
``nemo_curator/stages/text/filters/heuristic`` (``string.py`` and ``repetition/repetition.py``): the
same constructor parameters and defaults, the same score for the same text, and the same keep/drop
decision (including parameters whose names read the other way round; the docstrings say what is
kept). ``score_document`` computes the definition on one Python string, the way NeMo does;
``score_array`` computes the same numbers for a whole column at once (see :mod:`..text`).

Where NeMo cannot score a document (it divides by zero, or takes the ``max`` of no words, on an empty
or whitespace-only one, and the pipeline fails) these filters give the score that drops it, as NeMo's
own filters do for empty text elsewhere ("Remove the document if it is empty"); each docstring names
the value. Words are split on whitespace, as NeMo does for every language but Chinese (``lang="zh"``,
jieba) and Japanese (``lang="ja"``, MeCab), which these filters refuse.

One module per family under ``heuristic/``, as the catalogue groups them. Import the filters from here (or from
the ``stages`` package): the modules may move.
"""

from curator_slurm.stages.filters.heuristic import characters, lines, repetition, substrings, words
from curator_slurm.stages.filters.heuristic.characters import *  # noqa: F403
from curator_slurm.stages.filters.heuristic.lines import *  # noqa: F403
from curator_slurm.stages.filters.heuristic.repetition import *  # noqa: F403
from curator_slurm.stages.filters.heuristic.substrings import *  # noqa: F403
from curator_slurm.stages.filters.heuristic.words import *  # noqa: F403

from .base import DocumentFilter
from .decide import BaseFilter, Decision, first_reason
from .score import Filter, Score, ScoreFilter

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
    "Score",
    "ScoreFilter",
    "first_reason",
    *characters.__all__,
    *lines.__all__,
    *repetition.__all__,
    *substrings.__all__,
    *words.__all__,
]

"""datatrove's quality filters, URL filter, PII formatter, sampler, simple filters (lambda, regex, C4
paragraphs, unigram log-probability) and formatters, under datatrove's names, parameters and
decisions, as stages of their own; exported from here only, not from :mod:`..stages`.
Design: docs/design.md, section Filters."""

from curator_slurm.stages.filters.decide import REASON_FIELD, DatatroveFilter, Decision
from curator_slurm.stages.filters.quality.c4 import C4BadWordsFilter, C4QualityFilter
from curator_slurm.stages.filters.quality.fineweb import FineWebQualityFilter
from curator_slurm.stages.filters.quality.gopher import GopherQualityFilter, GopherRepetitionFilter
from curator_slurm.stages.filters.sampler import SamplerFilter
from curator_slurm.stages.filters.simple import (
    C4ParagraphFilter,
    Document,
    LambdaFilter,
    RegexFilter,
    UnigramLogProbFilter,
)
from curator_slurm.stages.filters.url import URLFilter
from curator_slurm.stages.formatters import BaseFormatter, FTFYFormatter, SymbolLinesFormatter
from curator_slurm.stages.modifiers.pii import PIIFormatter

#: The datatrove classes this package copies, by name.
DATATROVE_STAGES = (
    "GopherQualityFilter",
    "GopherRepetitionFilter",
    "C4QualityFilter",
    "C4BadWordsFilter",
    "FineWebQualityFilter",
    "URLFilter",
    "PIIFormatter",
    "SamplerFilter",
    "LambdaFilter",
    "RegexFilter",
    "C4ParagraphFilter",
    "UnigramLogProbFilter",
    "BaseFormatter",
    "FTFYFormatter",
    "SymbolLinesFormatter",
)

__all__ = [
    "DATATROVE_STAGES",
    "REASON_FIELD",
    "BaseFormatter",
    "C4BadWordsFilter",
    "C4ParagraphFilter",
    "C4QualityFilter",
    "DatatroveFilter",
    "Decision",
    "Document",
    "FTFYFormatter",
    "FineWebQualityFilter",
    "GopherQualityFilter",
    "GopherRepetitionFilter",
    "LambdaFilter",
    "PIIFormatter",
    "RegexFilter",
    "SamplerFilter",
    "SymbolLinesFormatter",
    "URLFilter",
    "UnigramLogProbFilter",
]

"""datatrove's quality filters, URL filter, PII formatter and sampler, under datatrove's names, with its
parameters (names, defaults, meaning) and its decisions, as pipeline stages.

``from <package>.stages.datatrove import GopherQualityFilter, C4QualityFilter, ...``: each class mirrors
the class of the same name in datatrove 0.10 (``datatrove.pipeline.filters``, ``.formatters.pii``) and is a
stage of its own (``pipeline.add_stage(GopherQualityFilter())``), as in datatrove, rather than a score for
:class:`..ScoreFilter`: datatrove's filters decide by several rules at once and say
which one removed a document. They are exported from this package only, not from
:mod:`..stages` (the package above), next to NeMo Curator's filters of similar intent and other rules (NeMo's
``WordCountFilter`` is not Gopher's word count; datatrove's language filter is
``stages.LanguageFilter(backend="fasttext")``).

Words and sentences are spaCy's blank English tokenizer's and sentencizer's, as datatrove counts them
(the ``fineweb`` extra; no model download); each module's docstring says where the project had to choose
where datatrove fails (a division by zero) or depends on scheduling (random draws, PII replacement turns).
"""

from curator_slurm.stages.filters.decide import REASON_FIELD, DatatroveFilter, Decision
from curator_slurm.stages.filters.quality.c4 import C4BadWordsFilter, C4QualityFilter
from curator_slurm.stages.filters.quality.fineweb import FineWebQualityFilter
from curator_slurm.stages.filters.quality.gopher import GopherQualityFilter, GopherRepetitionFilter
from curator_slurm.stages.filters.sampler import SamplerFilter
from curator_slurm.stages.filters.url import URLFilter
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
)

__all__ = [
    "DATATROVE_STAGES",
    "REASON_FIELD",
    "C4BadWordsFilter",
    "C4QualityFilter",
    "DatatroveFilter",
    "Decision",
    "FineWebQualityFilter",
    "GopherQualityFilter",
    "GopherRepetitionFilter",
    "PIIFormatter",
    "SamplerFilter",
    "URLFilter",
]

"""Pipeline stages: readers, filters, modifiers, writers (JSONL, Parquet, Megatron), and bases for your own.

Every filter (and ``ScoreFilter``, ``Score``, ``Filter``) is re-exported from :mod:`.filters` and every
modifier (and ``Modify``) from :mod:`.modifiers`, by their ``__all__``: a filter or modifier added
there is exported here too.
"""

from . import filters, modifiers
from .base import PASSTHROUGH, CompositeStage, ProcessingStage, Resources
from .fasttext import FastTextClassifierFilter, FastTextQualityFilter
from .filters import *  # noqa: F403
from .ids import AddId
from .language import LanguageFilter
from .megatron import MegatronTokenizerWriter
from .modifiers import *  # noqa: F403
from .partitioning import FilePartitioningStage
from .readers import FileReader, FileReaderStage, JsonlReader, JsonlReaderStage, ParquetReader, ParquetReaderStage
from .writers import JsonlWriter, ParquetWriter

__all__ = [
    "PASSTHROUGH",
    "AddId",
    "CompositeStage",
    "FastTextClassifierFilter",
    "FastTextQualityFilter",
    "FilePartitioningStage",
    "FileReader",
    "FileReaderStage",
    "JsonlReader",
    "JsonlReaderStage",
    "JsonlWriter",
    "LanguageFilter",
    "MegatronTokenizerWriter",
    "ParquetReader",
    "ParquetReaderStage",
    "ParquetWriter",
    "ProcessingStage",
    "Resources",
    *filters.__all__,
    *modifiers.__all__,
]

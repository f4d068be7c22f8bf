"""Pipeline stages: readers, filters, modifiers, writers (JSONL, Parquet, Megatron), and bases for your own.

Every filter (and ``ScoreFilter``, ``Score``, ``Filter``) is re-exported from :mod:`.filters` and every
modifier (and ``Modify``) from :mod:`.modifiers`, by their ``__all__``: a filter or modifier added
there is exported here too.
"""

from . import filters, modifiers
from .base import PASSTHROUGH, CompositeStage, ProcessingStage, Resources
from .extract_justext import JusTextExtractor
from .extractors import HtmlExtractor, ResiliparseExtractor, TrafilaturaExtractor
from .fasttext import FastTextClassifierFilter, FastTextQualityFilter
from .filters import *  # noqa: F403
from .ids import AddId
from .language import LanguageFilter
from .megatron import MegatronTokenizerWriter
from .modifiers import *  # noqa: F403
from .partitioning import FilePartitioningStage
from .readers import FileReader, FileReaderStage, JsonlReader, JsonlReaderStage, ParquetReader, ParquetReaderStage
from .warc import WarcReader, WarcReaderStage, WetReader, WetReaderStage
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
    "HtmlExtractor",
    "JsonlReader",
    "JsonlReaderStage",
    "JsonlWriter",
    "JusTextExtractor",
    "LanguageFilter",
    "MegatronTokenizerWriter",
    "ParquetReader",
    "ParquetReaderStage",
    "ParquetWriter",
    "ProcessingStage",
    "ResiliparseExtractor",
    "Resources",
    "TrafilaturaExtractor",
    "WarcReader",
    "WarcReaderStage",
    "WetReader",
    "WetReaderStage",
    *filters.__all__,
    *modifiers.__all__,
]

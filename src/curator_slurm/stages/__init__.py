"""Pipeline stages: readers, filters, modifiers, writers (JSONL, Parquet, Megatron), and bases for your own.

Every filter (and ``ScoreFilter``, ``Score``, ``Filter``) is re-exported from :mod:`.filters` and every
modifier (and ``Modify``) from :mod:`.modifiers`, by their ``__all__``: a filter or modifier added
there is exported here too.
"""

from curator_slurm.stages.extractors.base import HtmlExtractor, ResiliparseExtractor, TrafilaturaExtractor
from curator_slurm.stages.extractors.justext import JusTextExtractor
from curator_slurm.stages.filters.classifiers import FastTextClassifierFilter, FastTextQualityFilter
from curator_slurm.stages.filters.decont import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer
from curator_slurm.stages.filters.language import LanguageFilter
from curator_slurm.stages.io.megatron import MegatronTokenizerWriter
from curator_slurm.stages.io.partitioning import FilePartitioningStage
from curator_slurm.stages.io.readers import (
    FileReader,
    FileReaderStage,
    JsonlReader,
    JsonlReaderStage,
    ParquetReader,
    ParquetReaderStage,
)
from curator_slurm.stages.io.warc import WarcReader, WarcReaderStage, WetReader, WetReaderStage
from curator_slurm.stages.io.writers import JsonlWriter, ParquetWriter
from curator_slurm.stages.modifiers.ids import AddId

from . import filters, modifiers
from .base import PASSTHROUGH, CompositeStage, ProcessingStage, Resources
from .filters import *  # noqa: F403
from .function_stage import FunctionStage, processing_stage
from .modifiers import *  # noqa: F403

__all__ = [
    "PASSTHROUGH",
    "AddId",
    "CompositeStage",
    "FastTextClassifierFilter",
    "FastTextQualityFilter",
    "FilePartitioningStage",
    "FileReader",
    "FileReaderStage",
    "FunctionStage",
    "HtmlExtractor",
    "JsonlReader",
    "JsonlReaderStage",
    "JsonlWriter",
    "JusTextExtractor",
    "LanguageFilter",
    "NGramsDecontConfig",
    "NGramsDecontFilter",
    "NGramsDecontIndexer",
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
    "processing_stage",
    *filters.__all__,
    *modifiers.__all__,
]

"""Pipeline stages: readers, filters, writers and the base classes to write your own."""

from .base import PASSTHROUGH, CompositeStage, ProcessingStage, Resources
from .filters import (
    DocumentFilter,
    MeanWordLengthFilter,
    RepeatedLinesFilter,
    ScoreFilter,
    SymbolRatioFilter,
    WordCountFilter,
)
from .partitioning import FilePartitioningStage
from .readers import JsonlReader, JsonlReaderStage, ParquetReader, ParquetReaderStage
from .writers import JsonlWriter, ParquetWriter

__all__ = [
    "PASSTHROUGH",
    "CompositeStage",
    "DocumentFilter",
    "FilePartitioningStage",
    "JsonlReader",
    "JsonlReaderStage",
    "JsonlWriter",
    "MeanWordLengthFilter",
    "ParquetReader",
    "ParquetReaderStage",
    "ParquetWriter",
    "ProcessingStage",
    "RepeatedLinesFilter",
    "Resources",
    "ScoreFilter",
    "SymbolRatioFilter",
    "WordCountFilter",
]

"""Pipeline stages: readers, filters, writers and the base classes to write your own."""

from curator_slurm.stages.base import PASSTHROUGH, CompositeStage, ProcessingStage, Resources
from curator_slurm.stages.filters import (
    DocumentFilter,
    MeanWordLengthFilter,
    RepeatedLinesFilter,
    ScoreFilter,
    SymbolRatioFilter,
    WordCountFilter,
)
from curator_slurm.stages.partitioning import FilePartitioningStage
from curator_slurm.stages.readers import JsonlReader, JsonlReaderStage, ParquetReader, ParquetReaderStage
from curator_slurm.stages.writers import JsonlWriter, ParquetWriter

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

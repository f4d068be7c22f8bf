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
from .ids import AddId
from .language import LanguageFilter
from .modifiers import (
    BoilerPlateStringModifier,
    DocumentModifier,
    FunctionModifier,
    LineRemover,
    MarkdownRemover,
    Modify,
    NewlineNormalizer,
    QuotationRemover,
    Slicer,
    UnicodeReformatter,
    UrlRemover,
)
from .partitioning import FilePartitioningStage
from .readers import JsonlReader, JsonlReaderStage, ParquetReader, ParquetReaderStage
from .writers import JsonlWriter, ParquetWriter

__all__ = [
    "PASSTHROUGH",
    "AddId",
    "BoilerPlateStringModifier",
    "CompositeStage",
    "DocumentFilter",
    "DocumentModifier",
    "FilePartitioningStage",
    "FunctionModifier",
    "JsonlReader",
    "JsonlReaderStage",
    "JsonlWriter",
    "LanguageFilter",
    "LineRemover",
    "MarkdownRemover",
    "MeanWordLengthFilter",
    "Modify",
    "NewlineNormalizer",
    "ParquetReader",
    "ParquetReaderStage",
    "ParquetWriter",
    "ProcessingStage",
    "QuotationRemover",
    "RepeatedLinesFilter",
    "Resources",
    "ScoreFilter",
    "Slicer",
    "SymbolRatioFilter",
    "UnicodeReformatter",
    "UrlRemover",
    "WordCountFilter",
]

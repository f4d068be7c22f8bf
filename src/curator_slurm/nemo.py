"""NeMo Curator 1.x's names in one module, for porting a NeMo script by changing its imports (and its executor):
``from nemo_curator.stages.text.filters import ScoreFilter`` becomes ``from curator_slurm.nemo import
ScoreFilter``. ``docs/from-nemo-curator.md`` maps each NeMo module to these names and says what differs;
``examples/nemo_port.py`` is a NeMo script ported so."""

from curator_slurm.pipeline import Pipeline
from curator_slurm.stages import filters as _filters
from curator_slurm.stages import modifiers as _modifiers
from curator_slurm.stages.base import CompositeStage, ProcessingStage, Resources
from curator_slurm.stages.extractors.base import ResiliparseExtractor, TrafilaturaExtractor
from curator_slurm.stages.extractors.justext import JusTextExtractor
from curator_slurm.stages.extractors.nemo import (
    CommonCrawlHTMLExtractor,
    CommonCrawlWarcIterator,
    DocumentIterateExtractStage,
)
from curator_slurm.stages.filters import *  # noqa: F403 - DocumentFilter, ScoreFilter, Score, Filter, the heuristics
from curator_slurm.stages.filters.classifiers import FastTextQualityFilter
from curator_slurm.stages.function_stage import processing_stage
from curator_slurm.stages.io.megatron import MegatronTokenizerWriter
from curator_slurm.stages.io.partitioning import FilePartitioningStage
from curator_slurm.stages.io.readers import JsonlReader, JsonlReaderStage, ParquetReader, ParquetReaderStage
from curator_slurm.stages.io.writers import JsonlWriter, ParquetWriter
from curator_slurm.stages.modifiers import *  # noqa: F403 - DocumentModifier, Modify, NeMo's modifiers
from curator_slurm.stages.modifiers.ids import AddId
from curator_slurm.tasks import DocumentBatch, EmptyTask, FileGroupTask, Task
from curator_slurm.workflows.dedup.nemo import ExactDeduplicationWorkflow, TextDuplicatesRemovalWorkflow

__all__ = [
    "AddId",
    "CommonCrawlHTMLExtractor",
    "CommonCrawlWarcIterator",
    "CompositeStage",
    "DocumentBatch",
    "DocumentIterateExtractStage",
    "EmptyTask",
    "ExactDeduplicationWorkflow",
    "FastTextQualityFilter",
    "FilePartitioningStage",
    "FileGroupTask",
    "JsonlReader",
    "JsonlReaderStage",
    "JsonlWriter",
    "JusTextExtractor",
    "MegatronTokenizerWriter",
    "ParquetReader",
    "ParquetReaderStage",
    "ParquetWriter",
    "Pipeline",
    "ProcessingStage",
    "ResiliparseExtractor",
    "Resources",
    "Task",
    "TextDuplicatesRemovalWorkflow",
    "TrafilaturaExtractor",
    "processing_stage",
    *_filters.__all__,
    *_modifiers.__all__,
]

"""Common Crawl extraction of WARC files already on disk, heuristic filters with a custom DocumentFilter and a custom
DocumentModifier, exact deduplication, and Megatron tokenization.

    python examples/nemo_port.py --warc-dir WARCS --output-dir OUT --tokenizer TOKENIZER
"""
# A NeMo Curator 1.x script ported by changing only its import lines and its executor lines: each changed line follows
# a "# NeMo:" comment holding the original, and tests/examples/nemo_original.py.txt is the whole original, which
# tests/examples/test_nemo_port.py compares with this file. Everything else is NeMo user code: the same classes,
# parameters and calls. The imports keep the original's one-per-module layout, so that each sits under the line it
# replaced (hence no import sorting here).
# ruff: noqa: I001

import argparse
import os

# NeMo: from nemo_curator.backends.xenna import XennaExecutor
from curator_slurm import LocalExecutor

# NeMo: from nemo_curator.core.client import RayClient
# NeMo: from nemo_curator.pipeline import Pipeline
from curator_slurm.nemo import Pipeline

# NeMo: from nemo_curator.stages.deduplication.exact.workflow import ExactDeduplicationWorkflow
from curator_slurm.nemo import ExactDeduplicationWorkflow

# NeMo: from nemo_curator.stages.file_partitioning import FilePartitioningStage
from curator_slurm.nemo import FilePartitioningStage

# NeMo: from nemo_curator.stages.text.deduplication import TextDuplicatesRemovalWorkflow
from curator_slurm.nemo import TextDuplicatesRemovalWorkflow

# NeMo: from nemo_curator.stages.text.download.base.iterator import DocumentIterateExtractStage
from curator_slurm.nemo import DocumentIterateExtractStage

# NeMo: from nemo_curator.stages.text.download.common_crawl.extract import CommonCrawlHTMLExtractor
from curator_slurm.nemo import CommonCrawlHTMLExtractor

# NeMo: from nemo_curator.stages.text.download.common_crawl.warc_iterator import CommonCrawlWarcIterator
from curator_slurm.nemo import CommonCrawlWarcIterator

# NeMo: from nemo_curator.stages.text.filters import DocumentFilter, Filter, ScoreFilter
from curator_slurm.nemo import DocumentFilter, Filter, ScoreFilter

# NeMo: from nemo_curator.stages.text.filters.heuristic import NonAlphaNumericFilter, WordCountFilter
from curator_slurm.nemo import NonAlphaNumericFilter, WordCountFilter

# NeMo: from nemo_curator.stages.text.filters.heuristic.repetition import RepeatedLinesFilter
from curator_slurm.nemo import RepeatedLinesFilter

# NeMo: from nemo_curator.stages.text.io.reader import JsonlReader, ParquetReader
from curator_slurm.nemo import JsonlReader, ParquetReader

# NeMo: from nemo_curator.stages.text.io.writer import JsonlWriter
from curator_slurm.nemo import JsonlWriter

# NeMo: from nemo_curator.stages.text.io.writer.megatron_tokenizer import MegatronTokenizerWriter
from curator_slurm.nemo import MegatronTokenizerWriter

# NeMo: from nemo_curator.stages.text.modifiers import DocumentModifier, Modify
from curator_slurm.nemo import DocumentModifier, Modify


class ShortLinesFilter(DocumentFilter):
    """Drops pages made mostly of short lines (menus, link lists): the share of non-blank lines shorter than
    ``min_line_chars`` characters must be at most ``max_short_line_ratio``."""

    def __init__(self, max_short_line_ratio: float = 0.6, min_line_chars: int = 30):
        super().__init__()
        self._max_short_line_ratio = max_short_line_ratio
        self._min_line_chars = min_line_chars
        self._name = "short_lines"

    def score_document(self, text: str) -> float:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return 1.0
        return sum(len(line) < self._min_line_chars for line in lines) / len(lines)

    def keep_document(self, score: float) -> bool:
        return score <= self._max_short_line_ratio


class SpaceCollapser(DocumentModifier):
    """Collapses runs of spaces and tabs inside each line, and strips each line."""

    def __init__(self):
        super().__init__()

    def modify_document(self, text: str) -> str:
        return "\n".join(" ".join(line.split()) for line in text.split("\n"))


def extract(warc_dir: str, extracted_dir: str, executor) -> None:
    pipeline = Pipeline(
        name="extract",
        description="Extract text from Common Crawl WARC files already downloaded.",
        stages=[
            FilePartitioningStage(file_paths=warc_dir, files_per_partition=1, file_extensions=[".warc.gz"]),
            DocumentIterateExtractStage(
                iterator=CommonCrawlWarcIterator(),
                extractor=CommonCrawlHTMLExtractor(algorithm="resiliparse"),
            ),
            JsonlWriter(path=extracted_dir),
        ],
    )
    pipeline.run(executor)


def curate(extracted_dir: str, filtered_dir: str, executor) -> None:
    pipeline = Pipeline(name="curate", description="Heuristic filters and a text cleaner.")
    pipeline.add_stage(JsonlReader(file_paths=extracted_dir))
    pipeline.add_stage(Filter(filter_fn=lambda language: language == "ENGLISH", filter_field="language"))
    pipeline.add_stage(ScoreFilter(filter_obj=WordCountFilter(min_words=50), text_field="text"))
    pipeline.add_stage(
        ScoreFilter(
            filter_obj=[NonAlphaNumericFilter(), RepeatedLinesFilter(), ShortLinesFilter()],
            text_field="text",
            score_field=["non_alpha_numeric", "repeated_lines", "short_lines"],
        )
    )
    pipeline.add_stage(Modify(modifier_fn=SpaceCollapser(), input_fields="text"))
    pipeline.add_stage(JsonlWriter(path=filtered_dir))
    pipeline.run(executor)


def deduplicate(filtered_dir: str, dedup_dir: str, deduplicated_dir: str, executor) -> None:
    exact_workflow = ExactDeduplicationWorkflow(
        input_path=filtered_dir,
        output_path=dedup_dir,
        input_filetype="jsonl",
        text_field="text",
        assign_id=True,
        perform_removal=False,
    )
    exact_workflow.run()
    removal_workflow = TextDuplicatesRemovalWorkflow(
        input_path=filtered_dir,
        ids_to_remove_path=os.path.join(dedup_dir, "ExactDuplicateIds"),
        output_path=deduplicated_dir,
        input_filetype="jsonl",
        output_filetype="parquet",
        id_generator_path=os.path.join(dedup_dir, "exact_id_generator.json"),
    )
    removal_workflow.run(executor)


def tokenize(deduplicated_dir: str, tokens_dir: str, tokenizer: str, executor) -> None:
    pipeline = Pipeline(
        name="megatron-tokenizer",
        stages=[
            ParquetReader(file_paths=deduplicated_dir),
            MegatronTokenizerWriter(path=tokens_dir, model_identifier=tokenizer, append_eod=True),
        ],
    )
    pipeline.run(executor)


def main(args: argparse.Namespace) -> None:
    # NeMo: ray_client = RayClient()
    # NeMo: ray_client.start()
    # NeMo: executor = XennaExecutor()
    executor = LocalExecutor()
    extracted_dir = os.path.join(args.output_dir, "extracted")
    filtered_dir = os.path.join(args.output_dir, "filtered")
    dedup_dir = os.path.join(args.output_dir, "exact_dedup")
    deduplicated_dir = os.path.join(args.output_dir, "deduplicated")
    extract(args.warc_dir, extracted_dir, executor)
    curate(extracted_dir, filtered_dir, executor)
    deduplicate(filtered_dir, dedup_dir, deduplicated_dir, executor)
    tokenize(deduplicated_dir, os.path.join(args.output_dir, "tokens"), args.tokenizer, executor)
    # NeMo: ray_client.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Extract, filter, deduplicate and tokenize Common Crawl WARC files.")
    parser.add_argument("--warc-dir", required=True, help="a directory of .warc.gz files")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--tokenizer", required=True, help="the tokenizer")
    main(parser.parse_args())

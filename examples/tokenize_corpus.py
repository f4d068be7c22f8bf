"""Tokenize a corpus (JSONL or Parquet, e.g. what examples/curate.py wrote) into Megatron training files.

python examples/tokenize_corpus.py --input curated/ --output tokens/ --tokenizer tokenizer.json
    [--eos-token '<|endoftext|>'] [--text-field text] [--merge-tokens N] [--merge-tasks K] [--workers N]

Phase "tokenize" writes one .bin/.idx pair per source task into OUTPUT/.curator-work/tokens; phase "merge"
concatenates them into OUTPUT/part_00000.bin/.idx, ... of about N tokens each (one pair without
--merge-tokens). The same file runs both phases in order on a laptop, and as one array per phase under
`curator-slurm submit examples/tokenize_corpus.py --shards 8 -- --input ... --output ... --tokenizer ...`.
The tokenizer is a local tokenizer.json (or a directory with one): nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import sys

from curator_slurm import CuratorError, LocalExecutor, PipelineFailedError, configure_logging, fs
from curator_slurm.runs.layout import DEFAULT_WORK_DIR_NAME
from curator_slurm.stages import JsonlReader, MegatronTokenizerWriter, ParquetReader
from curator_slurm.stages.io.megatron import tokenizer_options_problem
from curator_slurm.workflows.tokenization import MegatronTokenization


def input_format(path: str) -> str:
    """parquet when the input is (or holds) Parquet files, else jsonl: the files the readers would list (hidden
    ones, such as a workflow's own `.curator-work`, are not inputs), local or on object storage."""
    listed = fs.list_tree([path], None).files
    return "parquet" if any(fs.basename(f).endswith(".parquet") for f in listed) else "jsonl"


def build_workflow(args: argparse.Namespace) -> MegatronTokenization:
    fmt = args.format if args.format != "auto" else input_format(args.input)
    reader_class = ParquetReader if fmt == "parquet" else JsonlReader
    reader = reader_class(args.input, files_per_partition=args.files_per_partition).with_fields([args.text_field])
    writer = MegatronTokenizerWriter(
        os.path.join(args.output, DEFAULT_WORK_DIR_NAME, "tokens"),
        model_identifier=args.tokenizer,
        text_field=args.text_field,
        append_eod=not args.no_eos,
        eod_token=args.eos_token,
        bos_token=args.bos_token,
    )
    return MegatronTokenization(
        reader, writer, args.output, merge_tokens=args.merge_tokens or None, merge_tasks=args.merge_tasks
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, help="directory (or file) of JSONL or Parquet documents")
    parser.add_argument("--output", required=True, help="directory for the merged .bin/.idx files")
    parser.add_argument("--tokenizer", required=True, help="a local tokenizer.json, or a directory holding one")
    parser.add_argument("--eos-token", default=None, help="token appended to every document (default: the "
                        "tokenizer directory's eos_token)")  # fmt: skip
    parser.add_argument("--no-eos", action="store_true", help="append no end-of-document token")
    parser.add_argument("--bos-token", default=None, help="token put before every document (default: none)")
    parser.add_argument("--text-field", default="text")
    parser.add_argument("--merge-tokens", type=int, default=None, help="tokens per merged file (default: one file)")
    parser.add_argument("--merge-tasks", type=int, default=1, help="tasks of the merge phase (default 1)")
    parser.add_argument("--format", choices=["auto", "jsonl", "parquet"], default="auto")
    parser.add_argument("--files-per-partition", type=int, default=1)
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all usable CPUs)")
    args = parser.parse_args(argv)
    problem = tokenizer_options_problem(args.tokenizer, args.eos_token, args.no_eos)
    if problem:
        parser.error(problem)  # exit 2, before any work

    configure_logging()
    try:
        workflow = build_workflow(args)
        result = workflow.run(LocalExecutor(workers=args.workers))
    except PipelineFailedError as e:
        print(f"tokenize_corpus: {e}", file=sys.stderr)
        return 1
    except CuratorError as e:  # bad configuration or input, or a phase whose predecessor is not complete
        print(f"tokenize_corpus: {e}", file=sys.stderr)
        return 2
    if not result.planned:
        tokens = {name: r.tokens for name, r in result.phases.items()}
        print(f"tokenize_corpus: {result.summary()}; tokens written per phase: {tokens}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

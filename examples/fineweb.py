"""The FineWeb recipe, from WARC files to a deduplicated, PII-formatted corpus (and Megatron token files), as one
script.

python examples/fineweb.py (--input warcs/ | --input-list warc.paths.gz [--input s3://commoncrawl/])
    --output corpus/ [--extractor trafilatura] [--no-url-filter | --url-blocklist DIR]
    [--no-language-filter | --fasttext-model lid.176.bin] [--no-dedup] [--exclusions] [--compression gzip|zstd]
    [--tokenizer tokenizer.json [--eos-token T | --no-eos] [--merge-tokens N]] [--workers N]

The phases, as datatrove's ``examples/fineweb.py`` runs them (each filter under datatrove's name, with its
defaults and decisions):

1. ``base``: WarcReader -> URLFilter -> Trafilatura(favor_precision) -> LanguageFilter(en) ->
   GopherRepetitionFilter -> GopherQualityFilter -> C4QualityFilter(filter_no_terminal_punct=False) ->
   FineWebQualityFilter -> JSONL (in ``OUTPUT/.curator-work/base``);
2. MinHash deduplication of what ``base`` kept (5-word shingles, 14 bands x 8 rows: FineWeb's), the first
   occurrence in (WARC file, record) order surviving: phases ``signatures``, ``candidates``,
   ``components``, ``write``;
3. ``pii``: PIIFormatter (emails and public IPs replaced) -> ``OUTPUT/<source id>.jsonl``;
4. with ``--tokenizer``: ``tokenize`` (the corpus's texts, one ``.bin``/``.idx`` pair per source task in
   ``OUTPUT/.curator-work/tokens``) and ``merge`` (``OUTPUT/megatron/part_00000.bin``/``.idx``, ... of about
   ``--merge-tokens`` tokens each; one pair without it): every document of the corpus once, its tokens then
   the end-of-document token (``--eos-token``, or the tokenizer directory's ``eos_token``; none with
   ``--no-eos``). A bare ``tokenizer.json`` declares no end-of-document token, so it needs one of the two.

Each phase reads what the one before it *recorded* as written (``PhaseOutputsReader``), never a listing.
``--exclusions`` writes every step's removed documents to ``OUTPUT/removed/<n>_<step>``, datatrove's names:
``1_url``, ``2_lang``, ``3_gopher_rep``, ``4_gopher_qual``, ``5_c4``, ``6_fineweb_qual``, and ``7_dedup``
(each removed duplicate with ``survivor_path``/``survivor_row``: the document it duplicated, among the files
of ``OUTPUT/.curator-work/base``). ``--input-list`` reads the WARC files a list names, one path or
``s3://`` URI a line (``.gz`` lists are read decompressed: Common Crawl's ``warc.paths.gz``), relative lines
taken under ``--input``.

Locally ``python examples/fineweb.py ...`` runs the phases in order; ``curator-slurm submit
examples/fineweb.py --shards N -- ...`` submits one array per phase, each waiting for the one before;
``curator-slurm status OUTPUT/.curator-work/.curator-run`` shows every phase and, for ``base``, how many
documents each filter removed. The language filter is CLD2 (offline, built in) unless ``--fasttext-model``
names a fastText model (``lid.176.bin``, as FineWeb used, with datatrove's 0.65 threshold); the URL filter
uses only the block lists in ``--url-blocklist`` (datatrove's file names), as nothing is downloaded. Each step
that runs otherwise than FineWeb's (no block lists, no fastText model, another extractor or Trafilatura 2.x, no
dedup) is named in a warning in the run's first lines, and ``status`` and ``report`` repeat the warnings.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import os
import sys

from curator_slurm import CuratorError, LocalExecutor, Pipeline, PipelineFailedError, configure_logging, fs
from curator_slurm.errors import InputError
from curator_slurm.runs.funnel import describe_numbers
from curator_slurm.runs.layout import DEFAULT_WORK_DIR_NAME
from curator_slurm.slurm.status import workflow_numbers_of
from curator_slurm.stages import (
    JsonlWriter,
    JusTextExtractor,
    LanguageFilter,
    MegatronTokenizerWriter,
    ProcessingStage,
    ResiliparseExtractor,
    TrafilaturaExtractor,
    WarcReader,
)
from curator_slurm.stages.datatrove import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    PIIFormatter,
    URLFilter,
)
from curator_slurm.stages.io.megatron import tokenizer_options_problem
from curator_slurm.workflows.chain import PhaseOutputsReader
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from curator_slurm.workflows.dedup.minhash import FINEWEB_BANDS, FINEWEB_NGRAM, FINEWEB_ROWS
from curator_slurm.workflows.tokenization import tokenization_phases
from curator_slurm.workflows.workflow import Phase, PhaseResources, Workflow

#: Where the merged Megatron files go, inside OUTPUT (beside the JSONL corpus, which stays where it is).
MEGATRON_DIR = "megatron"
EXTRACTORS = {"trafilatura": TrafilaturaExtractor, "resiliparse": ResiliparseExtractor, "justext": JusTextExtractor}


def base_stages(args: argparse.Namespace) -> list[ProcessingStage]:
    """What follows the reader in the ``base`` phase: FineWeb's filters, in FineWeb's order."""
    stages: list[ProcessingStage] = []
    if not args.no_url_filter:
        stages.append(URLFilter(blocklist_dir=args.url_blocklist, exclusion_writer=removed(args, 1, "url")))
    stages.append(EXTRACTORS[args.extractor](time_limit=args.time_limit))
    if not args.no_language_filter:
        lang = removed(args, 2, "lang")
        if args.fasttext_model:
            stages.append(
                LanguageFilter(
                    "en",
                    backend="fasttext",
                    model_path=args.fasttext_model,
                    language_threshold=0.65,
                    exclusion_writer=lang,
                )
            )
        else:
            stages.append(LanguageFilter("en", exclusion_writer=lang))
    stages += [
        GopherRepetitionFilter(exclusion_writer=removed(args, 3, "gopher_rep")),
        GopherQualityFilter(exclusion_writer=removed(args, 4, "gopher_qual")),
        C4QualityFilter(filter_no_terminal_punct=False, exclusion_writer=removed(args, 5, "c4")),
        FineWebQualityFilter(exclusion_writer=removed(args, 6, "fineweb_qual")),
    ]
    return stages


def removed(args: argparse.Namespace, n: int, name: str) -> JsonlWriter | None:
    """With ``--exclusions``, the writer of step ``n``'s removed documents: ``OUTPUT/removed/<n>_<name>``
    (datatrove's directory names)."""
    where = fs.join(fs.absolute(args.output), "removed", f"{n}_{name}")
    return JsonlWriter(where, compression=args.compression) if args.exclusions else None


def inputs(args: argparse.Namespace) -> str | list[str]:
    """``--input``, or with ``--input-list`` the files it lists (one a line, ``#`` comments; a ``.gz`` list is
    read decompressed, as Common Crawl's ``warc.paths.gz``), relative lines taken under ``--input``."""
    if not args.input_list:
        return args.input
    opener = gzip.open if args.input_list.endswith(".gz") else open
    try:
        with opener(args.input_list, "rt", encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--input-list {args.input_list}: cannot read it ({e})") from e
    paths = [line for line in lines if line and not line.startswith("#")]
    if not paths:
        raise InputError(f"--input-list {args.input_list}: lists no file; give one path or s3:// URI a line")
    return [p if "://" in p or os.path.isabs(p) or not args.input else fs.join(args.input, p) for p in paths]


def build_workflow(args: argparse.Namespace) -> Workflow:
    """The recipe's phases as one workflow, each later phase reading what the one before it recorded."""
    work = fs.join(fs.absolute(args.output), DEFAULT_WORK_DIR_NAME)
    base = Pipeline("fineweb-base").add_stage(WarcReader(inputs(args)))
    for stage in base_stages(args):
        base.add_stage(stage)
    base.add_stage(JsonlWriter(fs.join(work, "base"), compression=args.compression))
    phases = [Phase("base", base)]
    if not args.no_dedup:
        so_far = Workflow("fineweb", work, phases)
        dedup = FuzzyDuplicates(
            reader=PhaseOutputsReader(base, so_far.run_dir("base"), so_far.output_of("base")),
            writer=JsonlWriter(fs.join(work, "deduped"), compression=args.compression),
            work_dir=work,
            ngram=FINEWEB_NGRAM,
            bands=FINEWEB_BANDS,
            rows=FINEWEB_ROWS,
            exclusion_writer=removed(args, 7, "dedup"),
        )
        phases += dedup.phases
    so_far = Workflow("fineweb", work, phases)
    last = phases[-1]
    pii = (
        Pipeline("fineweb-pii")
        .add_stage(PhaseOutputsReader(last.pipeline, so_far.run_dir(last), so_far.output_of(last.name)))
        .add_stage(PIIFormatter())
        .add_stage(JsonlWriter(args.output, compression=args.compression))
    )
    phases.append(Phase("pii", pii))
    if args.tokenizer:
        so_far = Workflow("fineweb", work, phases)
        reader = PhaseOutputsReader(pii, so_far.run_dir("pii"), so_far.output_of("pii"), fields=["text"])
        writer = MegatronTokenizerWriter(
            fs.join(work, "tokens"), model_identifier=args.tokenizer, append_eod=not args.no_eos,
            eod_token=args.eos_token,
        )  # fmt: skip
        megatron = fs.join(fs.absolute(args.output), MEGATRON_DIR)
        phases += tokenization_phases(reader, writer, megatron, work, merge_tokens=args.merge_tokens, name="fineweb")
    return Workflow(
        "fineweb",
        work,
        [dataclasses.replace(p, resources=RESOURCES.get(p.name, p.resources)) for p in phases],
        warnings=departures(args),
    )


def departures(args: argparse.Namespace) -> list[str]:
    """Where this run is not FineWeb's own method, one sentence each: printed first, and kept in the workflow's
    record for `status` and the report."""
    out = []
    if args.no_url_filter:
        out.append("no URL filter: every URL is kept (FineWeb removes the URLs of datatrove's block lists)")
    elif not args.url_blocklist:
        out.append("URL filter without block lists (no --url-blocklist): it keeps every URL (FineWeb removes "
                   "the URLs of datatrove's block lists)")  # fmt: skip
    if args.no_language_filter:
        out.append("no language filter: every language is kept (FineWeb keeps English by fastText lid.176 at 0.65)")
    elif not args.fasttext_model:
        out.append("language filter is CLD2 at score 0.3 (no --fasttext-model), whose scores are not fastText's "
                   "(FineWeb keeps English by fastText lid.176 at 0.65)")  # fmt: skip
    if args.extractor != "trafilatura":
        out.append(f"extractor {args.extractor}, not Trafilatura (FineWeb's)")
    else:
        from curator_slurm.stages.extractors.base import library_version

        release = library_version("trafilatura")
        if not release.startswith("trafilatura 1."):
            out.append(f"{release}: FineWeb was extracted with trafilatura 1.x (datatrove's pin), whose texts "
                       "differ; pip install 'trafilatura<1.12' to extract as it did")  # fmt: skip
    if args.no_dedup:
        out.append("no MinHash deduplication (FineWeb deduplicates each crawl)")
    return out


#: The Slurm resources of the phases that need more than the submission's plain options give every phase: the one
#: task that joins every duplicate pair, and the merge of the token files (``submit --phase-mem components=64G``
#: and the other ``--phase-<option>`` override them).
RESOURCES = {
    "components": PhaseResources(mem="16G", cpus_per_task=1, time="24:00:00"),
    "merge": PhaseResources(mem="8G", cpus_per_task=1),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", default=None, help="directory (or file, or s3:// URI) of .warc / .warc.gz "
                        "files; with --input-list, where its relative paths are (e.g. s3://commoncrawl/)")  # fmt: skip
    parser.add_argument("--input-list", default=None, help="a file listing the WARC files, one path or s3:// URI a "
                        "line (Common Crawl's warc.paths.gz as downloaded)")  # fmt: skip
    parser.add_argument("--output", required=True, help="directory for the corpus (JSONL)")
    parser.add_argument("--extractor", choices=sorted(EXTRACTORS), default="trafilatura")
    parser.add_argument("--time-limit", type=float, default=5.0, help="seconds per page before it is dropped")
    urls = parser.add_mutually_exclusive_group()
    urls.add_argument("--no-url-filter", action="store_true", help="keep every URL")
    urls.add_argument("--url-blocklist", default=None, help="directory of datatrove-style URL block lists")
    lang = parser.add_mutually_exclusive_group()
    lang.add_argument("--no-language-filter", action="store_true", help="keep every language")
    lang.add_argument("--fasttext-model", default=None, help="a fastText language model (lid.176.bin) to use")
    parser.add_argument("--no-dedup", action="store_true", help="skip the MinHash deduplication")
    parser.add_argument("--exclusions", action="store_true", help="write each step's removed documents")
    parser.add_argument("--compression", choices=["gzip", "zstd"], default=None,
                        help="compress every JSONL file written (.jsonl.gz / .jsonl.zst; default: none)")  # fmt: skip
    parser.add_argument("--tokenizer", default=None, help="a local tokenizer.json (or a directory with one): go on "
                        f"to Megatron .bin/.idx files in OUTPUT/{MEGATRON_DIR}")  # fmt: skip
    eos = parser.add_mutually_exclusive_group()
    eos.add_argument("--eos-token", default=None, help="token appended to every document (default: the "
                     "tokenizer directory's eos_token)")  # fmt: skip
    eos.add_argument("--no-eos", action="store_true", help="append no end-of-document token")
    parser.add_argument("--merge-tokens", type=int, default=None, help="tokens per merged file (default: one file)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all usable CPUs)")
    args = parser.parse_args(argv)
    if not args.input and not args.input_list:
        parser.error("give --input (WARC files) or --input-list (a file listing them)")
    if args.tokenizer is None:
        given = [o for o, v in (("--eos-token", args.eos_token), ("--no-eos", args.no_eos),
                                ("--merge-tokens", args.merge_tokens)) if v]  # fmt: skip
        if given:
            parser.error(f"{given[0]} applies to the token files: give --tokenizer too")
    else:
        problem = tokenizer_options_problem(args.tokenizer, args.eos_token, args.no_eos)
        if problem:
            parser.error(problem)
    if args.merge_tokens is not None and args.merge_tokens < 1:
        parser.error(f"--merge-tokens {args.merge_tokens}: give a number of tokens of at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    warnings = departures(args)
    if warnings:
        lines = [f"fineweb: WARNING: not FineWeb's own step: {w}" for w in warnings]
        print("\n".join(lines), file=sys.stderr, flush=True)
    configure_logging()
    try:
        workflow = build_workflow(args)
        result = workflow.run(LocalExecutor(workers=args.workers))
    except PipelineFailedError as e:
        print(f"fineweb: {e}", file=sys.stderr)
        return 1
    except CuratorError as e:  # bad configuration or input (a missing extra), found before any work was done
        print(f"fineweb: {e}", file=sys.stderr)
        return 2
    if not result.planned:
        print(f"fineweb: {result.summary()}")
    if not result.planned and len(result.phases) == len(workflow.phases):  # the whole workflow ran here
        print(f"fineweb: {describe_numbers(workflow_numbers_of(workflow.run_root))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

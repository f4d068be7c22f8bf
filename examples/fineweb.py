"""The FineWeb recipe, from WARC files to a deduplicated, PII-formatted corpus, as one script.

python examples/fineweb.py --input warcs/ --output corpus/ [--extractor trafilatura]
    [--no-url-filter | --url-blocklist DIR] [--no-language-filter | --fasttext-model lid.176.bin]
    [--no-dedup] [--exclusions] [--workers N]

The phases, as datatrove's ``examples/fineweb.py`` runs them (each filter under datatrove's name, with its
defaults and decisions):

1. ``base``: WarcReader -> URLFilter -> Trafilatura(favor_precision) -> LanguageFilter(en) ->
   GopherRepetitionFilter -> GopherQualityFilter -> C4QualityFilter(filter_no_terminal_punct=False) ->
   FineWebQualityFilter -> JSONL (in ``OUTPUT/.curator-work/base``);
2. MinHash deduplication of what ``base`` kept (5-word shingles, 14 bands x 8 rows: FineWeb's), the first
   occurrence in (WARC file, record) order surviving: phases ``signatures``, ``candidates``,
   ``components``, ``write``;
3. ``pii``: PIIFormatter (emails and public IPs replaced) -> ``OUTPUT/<source id>.jsonl``.

Locally ``python examples/fineweb.py ...`` runs the phases in order; ``curator-slurm submit
examples/fineweb.py --shards N -- ...`` submits one array per phase, each waiting for the one before;
``curator-slurm status OUTPUT/.curator-work/.curator-run`` shows every phase and, for ``base``, how many
documents each filter removed. The language filter is CLD2 (offline, built in) unless ``--fasttext-model``
names a fastText model (``lid.176.bin``, as FineWeb used, with datatrove's 0.65 threshold); the URL filter
uses only the block lists in ``--url-blocklist`` (datatrove's file names), as nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import sys

from curator_slurm import CuratorError, LocalExecutor, Pipeline, PipelineFailedError, configure_logging
from curator_slurm.stages import (
    JsonlWriter,
    JusTextExtractor,
    LanguageFilter,
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
from curator_slurm.workflows.chain import PhaseOutputsReader
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from curator_slurm.workflows.dedup.minhash import FINEWEB_BANDS, FINEWEB_NGRAM, FINEWEB_ROWS
from curator_slurm.workflows.workflow import Phase, Workflow

EXTRACTORS = {"trafilatura": TrafilaturaExtractor, "resiliparse": ResiliparseExtractor, "justext": JusTextExtractor}


def base_stages(args: argparse.Namespace) -> list[ProcessingStage]:
    """What follows the reader in the ``base`` phase: FineWeb's filters, in FineWeb's order."""

    def removed(n: int, name: str) -> JsonlWriter | None:  # datatrove's removed/<n>_<filter> directories
        return JsonlWriter(os.path.join(args.output, "removed", f"{n}_{name}")) if args.exclusions else None

    stages: list[ProcessingStage] = []
    if not args.no_url_filter:
        stages.append(URLFilter(blocklist_dir=args.url_blocklist, exclusion_writer=removed(1, "url")))
    stages.append(EXTRACTORS[args.extractor](time_limit=args.time_limit))
    if not args.no_language_filter:
        if args.fasttext_model:
            stages.append(
                LanguageFilter("en", backend="fasttext", model_path=args.fasttext_model, language_threshold=0.65)
            )
        else:
            stages.append(LanguageFilter("en"))
    stages += [
        GopherRepetitionFilter(exclusion_writer=removed(3, "gopher_rep")),
        GopherQualityFilter(exclusion_writer=removed(4, "gopher_qual")),
        C4QualityFilter(filter_no_terminal_punct=False, exclusion_writer=removed(5, "c4")),
        FineWebQualityFilter(exclusion_writer=removed(6, "fineweb_qual")),
    ]
    return stages


def build_workflow(args: argparse.Namespace) -> Workflow:
    work = os.path.join(os.path.abspath(args.output), ".curator-work")
    runs = os.path.join(work, ".curator-run")
    base = Pipeline("fineweb-base").add_stage(WarcReader(args.input))
    for stage in base_stages(args):
        base.add_stage(stage)
    base_out = os.path.join(work, "base")
    base.add_stage(JsonlWriter(base_out))
    phases = [Phase("base", base)]
    upstream, upstream_dir, upstream_out = base, os.path.join(runs, "base"), base_out
    if not args.no_dedup:
        deduped = os.path.join(work, "deduped")
        dedup = FuzzyDuplicates(
            reader=PhaseOutputsReader(base, upstream_dir, base_out),
            writer=JsonlWriter(deduped),
            work_dir=work,
            ngram=FINEWEB_NGRAM,
            bands=FINEWEB_BANDS,
            rows=FINEWEB_ROWS,
        )
        phases += dedup.phases
        upstream, upstream_dir, upstream_out = dedup.phases[-1].pipeline, os.path.join(runs, "write"), deduped
    pii = (
        Pipeline("fineweb-pii")
        .add_stage(PhaseOutputsReader(upstream, upstream_dir, upstream_out))
        .add_stage(PIIFormatter())
        .add_stage(JsonlWriter(args.output))
    )
    return Workflow("fineweb", work, [*phases, Phase("pii", pii)])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, help="directory (or file) of .warc / .warc.gz files")
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
    parser.add_argument("--exclusions", action="store_true", help="write each filter's removed documents")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all usable CPUs)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging()
    try:
        result = build_workflow(args).run(LocalExecutor(workers=args.workers))
    except PipelineFailedError as e:
        print(f"fineweb: {e}", file=sys.stderr)
        return 1
    except CuratorError as e:  # bad configuration or input (a missing extra), found before any work was done
        print(f"fineweb: {e}", file=sys.stderr)
        return 2
    if not result.planned:
        print(f"fineweb: {result.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Curate web text as NeMo Curator's heuristic pipeline does: stable ids, Unicode repair, ten heuristic
filters with NeMo Curator's names and defaults, English only, Parquet out. It needs two extras beyond the
core install (`pip install -e '.[lang,unicode]'` in the checkout): pycld2 for LanguageFilter, ftfy for the repair.

    python examples/curate_web.py --make-sample data/ --files 8 --docs-per-file 200   # a web-like corpus
    python examples/curate_web.py --input data/ --output out/

The same command is one shard of the work inside a Slurm array task (or with CURATOR_SHARD_INDEX and
CURATOR_NUM_SHARDS set); the shards together write exactly what one process writes, ids included.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

from curator_slurm import CuratorError, Pipeline, PipelineFailedError, configure_logging
from curator_slurm.backends import EXECUTORS, make_executor
from curator_slurm.stages import (
    AddId,
    BulletsFilter,
    JsonlReader,
    LanguageFilter,
    MeanWordLengthFilter,
    Modify,
    NonAlphaNumericFilter,
    NumbersFilter,
    ParquetWriter,
    PunctuationFilter,
    RepeatedLinesFilter,
    RepeatedParagraphsFilter,
    ScoreFilter,
    SymbolsToWordsFilter,
    UnicodeReformatter,
    UrlsFilter,
    WordCountFilter,
)


def build_pipeline(input_dir: str, output_dir: str, files_per_partition: int = 1) -> Pipeline:
    """Reader -> ids -> Unicode repair -> heuristic filters (cheapest first) -> language -> Parquet."""
    heuristics = [
        WordCountFilter(min_words=50, max_words=100_000),
        NonAlphaNumericFilter(max_non_alpha_numeric_to_text_ratio=0.25),
        SymbolsToWordsFilter(max_symbol_to_word_ratio=0.1),
        NumbersFilter(max_number_to_text_ratio=0.15),
        UrlsFilter(max_url_to_text_ratio=0.2),
        BulletsFilter(max_bullet_lines_ratio=0.9),
        MeanWordLengthFilter(min_mean_word_length=3, max_mean_word_length=10),
        RepeatedLinesFilter(max_repeated_line_fraction=0.7),
        RepeatedParagraphsFilter(max_repeated_paragraphs_ratio=0.7),
        PunctuationFilter(max_num_sentences_without_endmark_ratio=0.85),
    ]
    pipeline = (
        Pipeline("curate_web")
        .add_stage(JsonlReader(input_dir, files_per_partition=files_per_partition))
        # Ids first: they derive from each document's position in its file, known until a filter drops rows.
        .add_stage(AddId("id", id_prefix="web"))
        .add_stage(Modify(UnicodeReformatter()))
    )
    for heuristic in heuristics:
        pipeline.add_stage(ScoreFilter(heuristic, text_field="text"))
    return pipeline.add_stage(LanguageFilter(languages="en", min_score=0.3)).add_stage(ParquetWriter(output_dir))


# --- a web-like sample corpus ----------------------------------------------------------------------

_SUBJECTS = [
    "The city council",
    "A small bakery on the corner",
    "Our volunteer team",
    "The new public library",
    "Researchers at the state university",
    "The local football club",
    "A group of parents",
    "The regional water board",
    "Several shop owners",
    "The hospital board",
    "Our editor",
    "The weather service",
]
_VERBS = ["announced", "discussed", "reviewed", "opened", "reported on", "celebrated", "planned", "questioned"]
_OBJECTS = [
    "a plan to repair the old bridge",
    "the budget for the coming year",
    "a program of free evening classes",
    "the results of the spring survey",
    "new opening hours for the market",
    "the cost of cleaning the river",
    "a festival that brings the whole town together",
    "changes to the bus routes in the north of the city",
    "the history of the harbour and its workers",
    "how the schools will use the new funding",
]
_TAILS = [
    "on Tuesday evening",
    "after a long and lively meeting",
    "for the first time in ten years",
    "with the support of many residents",
    "despite some concerns about the timing",
    "in a letter to the readers",
    "at the start of the summer",
    "and invited everyone to share their views",
]
_GERMAN = [
    "Die Stadtverwaltung hat am Dienstag einen neuen Plan für den Verkehr in der Innenstadt vorgestellt.",
    "Viele Bürger haben sich über die langen Wartezeiten bei den Behörden beschwert.",
    "Der Sportverein feiert in diesem Jahr sein hundertjähriges Bestehen mit einem großen Fest.",
    "Die Bibliothek bleibt wegen Renovierungsarbeiten bis Ende des Monats geschlossen.",
]
_FRENCH = [
    "Le conseil municipal a présenté mardi un nouveau projet pour rénover le vieux pont de la ville.",
    "Les habitants du quartier sont invités à donner leur avis sur les nouveaux horaires du marché.",
    "La bibliothèque municipale propose des cours gratuits le soir pour les adultes.",
    "Le club de football local a célébré sa victoire avec tous les supporters de la région.",
]
_COOKIES = "This website uses cookies to improve your experience. Read our privacy policy."


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."


def _article(rng: random.Random, paragraphs: int) -> str:
    return "\n\n".join(" ".join(_sentence(rng) for _ in range(rng.randint(2, 4))) for _ in range(paragraphs))


def _mojibake(text: str) -> str:
    """Curly apostrophes as a page decoded with the wrong encoding shows them (UTF-8 read as cp1252)."""
    return text.replace(" the ", " the city\u2019s ", 1).replace("\u2019", "\u2019".encode().decode("cp1252"))


def make_document(rng: random.Random) -> str:
    """One web page's text: mostly articles (some with mojibake, a cookie banner or a link), and the
    junk that heuristic filters exist for: stubs, link lists, menus, bullets, tables, symbols, other
    languages, empty pages."""
    kind = rng.random()
    if kind < 0.55:
        text = _article(rng, rng.randint(3, 7))
        if rng.random() < 0.3:
            text = _mojibake(text)
        if rng.random() < 0.3:
            text += f"\n\nMore at https://news.example.org/story/{rng.randint(1000, 9999)}"
        if rng.random() < 0.2:
            text = _COOKIES + "\n\n" + text
        return text
    if kind < 0.63:
        return _sentence(rng)  # a stub: too few words
    if kind < 0.68:  # a paragraph and a long list of links
        links = "\n".join(f"https://example.com/p{rng.randint(1, 999)}" for _ in range(25))
        return _article(rng, 1) + "\n\nRelated links:\n" + links
    if kind < 0.73:
        menu = ["Home", "About us", "Contact", "Subscribe", "Log in"]
        return "\n".join(menu * 12) + "\n" + _sentence(rng)
    if kind < 0.78:
        return "\n".join(f"\u2022 {_sentence(rng)}" for _ in range(rng.randint(8, 14)))
    if kind < 0.83:
        rows = [" ".join(str(rng.randint(0, 99999)) for _ in range(8)) for _ in range(20)]
        return "Results table\n" + "\n".join(rows)
    if kind < 0.85:  # teaser text cut off everywhere
        return " ".join(w + (" ..." if k % 4 == 3 else "") for k, w in enumerate(_article(rng, 2).split()))
    if kind < 0.87:  # an encoded blob
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
        return " ".join("".join(rng.choices(alphabet, k=rng.randint(16, 40))) for _ in range(80))
    if kind < 0.93:
        pool = _GERMAN if rng.random() < 0.5 else _FRENCH
        return "\n\n".join(" ".join(rng.sample(pool, 3)) for _ in range(4))
    if kind < 0.96:
        para = _sentence(rng) + " " + _sentence(rng)
        return "\n\n".join([para] * 10)  # one paragraph repeated
    return rng.choice(["", "   ", "\n\n"])


def make_web_corpus(out_dir: str, files: int = 8, docs_per_file: int = 200, seed: int = 0) -> list[str]:
    """Write ``files`` JSONL files of web-like documents (``url``, ``text``) into ``out_dir``; the same
    arguments give the same bytes on any machine."""
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(seed)
    paths = []
    for i in range(files):
        path = os.path.join(out_dir, f"crawl-{i:05d}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for j in range(docs_per_file):
                doc = {"url": f"https://site{rng.randint(1, 500)}.example/{i}/{j}", "text": make_document(rng)}
                f.write(json.dumps(doc) + "\n")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", help="directory (or file) of JSONL documents with a 'text' field")
    parser.add_argument("--output", help="directory for the Parquet output")
    parser.add_argument("--executor", choices=EXECUTORS, default="local")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all usable CPUs)")
    parser.add_argument("--files-per-partition", type=int, default=1)
    parser.add_argument("--make-sample", metavar="DIR", help="write a web-like sample corpus into DIR and exit")
    parser.add_argument("--files", type=int, default=8, help="with --make-sample: number of files")
    parser.add_argument("--docs-per-file", type=int, default=200, help="with --make-sample: documents per file")
    args = parser.parse_args(argv)

    if args.make_sample:
        paths = make_web_corpus(args.make_sample, args.files, args.docs_per_file)
        print(f"curate_web: wrote {len(paths)} files of {args.docs_per_file} documents to {args.make_sample}")
        return 0
    if not args.input or not args.output:
        parser.error("--input and --output are required (or --make-sample DIR)")

    configure_logging()
    try:
        pipeline = build_pipeline(args.input, args.output, args.files_per_partition)
        result = pipeline.run(make_executor(args.executor, workers=args.workers))
    except PipelineFailedError as e:
        print(f"curate_web: {e}", file=sys.stderr)
        return 1
    except CuratorError as e:  # bad configuration or input, or a missing extra, found before any work
        print(f"curate_web: {e}", file=sys.stderr)
        return 2
    print(
        f"curate_web: {len(result.output_files)} files written, {result.rows_in} docs in, {result.rows_out} docs "
        f"out, {result.seconds:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A deterministic sample corpus: JSONL files of made-up documents, for the demo, tests and benchmarks.

Same arguments, same bytes, on any machine. About a fifth of the documents are too short for the
demo's word-count filter, so filtering visibly does something.

    python -m curator_slurm.samples.corpus OUT_DIR --files 8 --docs-per-file 500
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random

_SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "an", "el", "or", "us", "ba", "de", "fi", "go"]


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    return ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(size)]


def make_document(rng: random.Random, vocab: list[str], words: int) -> str:
    sentences, left = [], words
    while left > 0:
        n = min(left, rng.randint(5, 18))
        sentence = " ".join(rng.choice(vocab) for _ in range(n))
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
        left -= n
    return " ".join(sentences)


def make_corpus(
    out_dir: str,
    files: int = 8,
    docs_per_file: int = 500,
    seed: int = 0,
    skew: float = 0.0,
    prefix: str = "part",
) -> list[str]:
    """Write ``files`` JSONL files into ``out_dir`` and return their paths.

    ``skew`` > 0 draws each file's document count from a lognormal distribution with that sigma
    (mean ``docs_per_file``), for testing load balance on uneven inputs.
    """
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    paths = []
    for i in range(files):
        n = docs_per_file
        if skew > 0:
            n = max(1, int(rng.lognormvariate(math.log(docs_per_file) - skew**2 / 2, skew)))
        path = os.path.join(out_dir, f"{prefix}-{i:05d}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for j in range(n):
                words = rng.randint(3, 40) if rng.random() < 0.2 else rng.randint(50, 400)
                doc = {
                    "id": f"{prefix}-{i:05d}-{j:06d}",
                    "text": make_document(rng, vocab, words),
                    "source": "sample",
                }
                f.write(json.dumps(doc) + "\n")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--docs-per-file", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skew", type=float, default=0.0, help="lognormal sigma of per-file document counts")
    args = parser.parse_args(argv)
    paths = make_corpus(args.out_dir, args.files, args.docs_per_file, args.seed, args.skew)
    size = sum(os.path.getsize(p) for p in paths)
    print(f"wrote {len(paths)} files ({size / 1e6:.1f} MB) to {args.out_dir}")


if __name__ == "__main__":
    main()

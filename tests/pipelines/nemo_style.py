"""A pipeline written the way NeMo Curator's tutorials write theirs: custom filters keep their settings in
private attributes, one of them a ``set`` of words (whose iteration order changes with PYTHONHASHSEED),
and score with bools (``keep_document(score): return score``, the Llama-Nemotron idiom).

    python tests/pipelines/nemo_style.py --input IN --output OUT [--workers N]

Prints ``set order: ...`` (the first words the set yields in this process) on stderr, so a test can show
that its processes really iterated the set differently.
"""

from __future__ import annotations

import argparse
import sys

from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.stages import DocumentFilter, JsonlReader, ParquetWriter, ScoreFilter

BLOCKED = ["kaka", "lolo", "mimi", "nene", "susu", "tata", "riri", "popo", "anan", "elel", "oror", "usus"]


class BlockedWordsFilter(DocumentFilter):
    """Keeps a document none of whose words is blocked: a bool score, kept as it is."""

    def __init__(self, words: list[str]) -> None:
        super().__init__()
        self._blocked = set(words)

    def score_document(self, text: str) -> bool:
        return not any(word in self._blocked for word in text.lower().split())

    def keep_document(self, score: bool) -> bool:
        return score


class MinWordsFilter(DocumentFilter):
    """Keeps a document of at least ``min_words`` words: an int score, compared."""

    def __init__(self, min_words: int = 50) -> None:
        super().__init__()
        self._min_words = min_words
        self._options = {"split": "whitespace", "lower": False}

    def score_document(self, text: str) -> int:
        return len(text.split())

    def keep_document(self, score: int) -> bool:
        return score >= self._min_words


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    blocked = BlockedWordsFilter(BLOCKED)
    print(f"set order: {' '.join(list(blocked._blocked)[:6])}", file=sys.stderr)
    pipeline = (
        Pipeline("nemo_style")
        .add_stage(JsonlReader(args.input))
        .add_stage(ScoreFilter(blocked, score_field="clean"))
        .add_stage(ScoreFilter(MinWordsFilter(50), score_field="words"))
        .add_stage(ParquetWriter(args.output))
    )
    pipeline.run(LocalExecutor(workers=args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())

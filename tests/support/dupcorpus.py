"""A JSONL corpus full of duplicates (inside files, across files, differing only in whitespace), and the
brute-force answer exact deduplication must give on it."""

from __future__ import annotations

import json
import random
from pathlib import Path


def make_dup_corpus(root: Path, files: int = 8, docs: int = 40, seed: int = 7) -> None:
    """JSONL files whose texts come from a small pool, so duplicates fall inside files, across files and
    (for any shard count) across shards; some copies differ only in whitespace, which normalisation joins."""
    rng = random.Random(seed)
    pool = [f"document {i} " + " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(30))
            for i in range(120)]  # fmt: skip
    n = 0
    for f in range(files):
        sub = root / ("a" if f % 2 else "b")
        sub.mkdir(parents=True, exist_ok=True)
        with (sub / f"part-{f:02d}.jsonl").open("w") as out:
            for _ in range(docs):
                text = rng.choice(pool)
                if rng.random() < 0.2:
                    text = "  " + text.replace(" ", "  \n ", 3) + "\n"
                out.write(json.dumps({"id": f"doc-{n}", "text": text, "n": n}) + "\n")
                n += 1


def brute_force(root: Path) -> tuple[list[str], dict[str, str]]:
    """Kept ids in (relative path, row) order, and duplicate id -> survivor id."""
    seen: dict[str, str] = {}
    kept, dropped = [], {}
    for path in sorted(root.rglob("*.jsonl"), key=lambda p: p.relative_to(root).as_posix()):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            norm = " ".join(record["text"].split())
            if norm in seen:
                dropped[record["id"]] = seen[norm]
            else:
                seen[norm] = record["id"]
                kept.append(record["id"])
    return kept, dropped

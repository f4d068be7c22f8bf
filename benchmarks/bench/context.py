"""What every row is handed: the settings of this bench run and the corpora by role."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .corpora import Corpus, CorpusSpec, corpus_for_mb, ensure_corpus
from .demo import BARE_IMPORTS, curate_cmd
from .harness import fresh_dir, progress, run_child


@dataclass
class Bench:
    """The settings of this bench run (``root``: the bench directory; ``repeat``: runs per measurement;
    ``quick``: the smoke test's tiny sizes) and the corpora generated so far, shared by every row that
    names the same role."""

    root: Path
    repeat: int
    quick: bool
    size_mb: float
    corpora: dict[str, Corpus] = field(default_factory=dict)

    @property
    def docs_per_file(self) -> int:
        return 20 if self.quick else 1000

    @property
    def micro_repeat(self) -> int:
        """Repeats for rows that take a second or less: more samples tame process-start jitter."""
        return self.repeat if self.quick else max(self.repeat, 5)

    @property
    def select_repeat(self) -> int:
        """Repeats for row 5, whose samples take a tenth of a second."""
        return self.repeat if self.quick else max(self.repeat, 9)

    @property
    def pinned_cores(self) -> list[int]:
        """Two cores to pin row 3's sides to, or none when fewer are usable."""
        cores = sorted(os.sched_getaffinity(0))[:2] if hasattr(os, "sched_getaffinity") else []
        return cores if len(cores) == 2 else []

    @property
    def pairs(self) -> int:
        """Row 3's pairs: ``repeat`` with the shards on each core when the sides swap cores (so each side
        has each core as often, and each core's median is a median of ``repeat``), else ``repeat``."""
        return 2 * self.repeat if self.pinned_cores else self.repeat

    def corpus(self, role: str) -> Corpus:
        """The corpus for a role; each is generated once and shared by every row that names it."""
        if role not in self.corpora:
            specs = {
                "base": corpus_for_mb(self.size_mb, self.docs_per_file, min_files=64 if self.quick else 1),
                # Row 3 needs enough source tasks that every one of 16 shards gets some, and enough work
                # per shard (about 50 MB) that a shard is more than the start of a Python process.
                "sharded": corpus_for_mb(self.size_mb if self.quick else 800, self.docs_per_file, min_files=64),
                "one-file": CorpusSpec(files=1, docs_per_file=self.docs_per_file),
                "rss-small": corpus_for_mb(0.2 if self.quick else 20, self.docs_per_file, min_files=2),
                # Rows 15a-15b (issue #19): many small files, one source task each.
                "small-files": CorpusSpec(files=100 if self.quick else 5000, docs_per_file=20),
            }
            specs["rss-large"] = CorpusSpec(files=10 * specs["rss-small"].files, docs_per_file=self.docs_per_file)
            self.corpora[role] = ensure_corpus(self.root / "corpora", specs[role])
        return self.corpora[role]

    def out(self, name: str) -> Path:
        return self.root / "out" / f"{os.getpid()}-{name}"

    _warm: bool = False

    def warm_children(self) -> None:
        """Run the demo job's child commands once, untimed, so bytecode and file caches are warm."""
        if self._warm:
            return
        progress("warming the bytecode cache for child processes (untimed)")
        corpus = self.corpus("one-file")
        with fresh_dir(self.out("warm")) as out:
            run_child(curate_cmd(corpus.path, out))
        run_child([sys.executable, "-c", BARE_IMPORTS])
        self._warm = True

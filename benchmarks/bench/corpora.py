"""The generated corpora (``curator_slurm.samples.corpus.make_corpus``, seeded): named by every argument and the
generator's version, made once under the bench directory and reused."""

from __future__ import annotations

import inspect
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import curator_slurm
import curator_slurm.samples.corpus
from curator_slurm.samples.corpus import make_corpus
from curator_slurm.tasks import content_id

from .harness import BenchError, progress

#: About what one make_corpus document weighs, to size a corpus in MB.
BYTES_PER_DOC = 1190


@dataclass(frozen=True)
class CorpusSpec:
    """A make_corpus corpus; the directory name encodes every argument, so reuse is safe."""

    files: int
    docs_per_file: int
    seed: int = 0

    @property
    def name(self) -> str:
        return f"jsonl-f{self.files}-d{self.docs_per_file}-s{self.seed}-g{GENERATOR}"


@dataclass(frozen=True)
class Corpus:
    path: Path
    spec: CorpusSpec
    files: list[Path]
    bytes: int

    @property
    def mb(self) -> float:
        return self.bytes / 1e6

    @property
    def size(self) -> str:
        return f"{self.mb:.0f} MB" if self.mb >= 10 else f"{self.mb:.1f} MB"


MARKER = ".complete"  # hidden: the framework's file listing skips it
#: Which version of the generator made a corpus: a change to curator_slurm.samples.corpus makes new corpora
#: instead of silently reusing ones it would no longer produce.
GENERATOR = content_id(inspect.getsource(curator_slurm.samples.corpus))[:8]


def ensure_corpus(root: Path, spec: CorpusSpec) -> Corpus:
    """The corpus for ``spec`` under ``root``, generated (into a temporary directory renamed into place,
    so an interrupted run never leaves a half corpus that looks complete) unless already there."""
    path = root / spec.name
    if not (path / MARKER).exists():
        progress(f"generating corpus {spec.name} (~{spec.files * spec.docs_per_file * BYTES_PER_DOC / 1e6:.0f} MB)")
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}.tmp-", dir=root))
        try:
            make_corpus(str(tmp), files=spec.files, docs_per_file=spec.docs_per_file, seed=spec.seed)
            (tmp / MARKER).write_text(json.dumps(asdict(spec)) + "\n")
            if path.exists():  # an incomplete leftover
                shutil.rmtree(path)
            try:
                tmp.rename(path)
            except OSError:
                if not (path / MARKER).exists():  # not a concurrent run that finished first
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    files = sorted(path.glob("*.jsonl"))
    if len(files) != spec.files:
        raise BenchError(f"{path}: expected {spec.files} files, found {len(files)}; delete it to regenerate")
    return Corpus(path=path, spec=spec, files=files, bytes=sum(f.stat().st_size for f in files))


def corpus_for_mb(size_mb: float, docs_per_file: int, min_files: int = 1) -> CorpusSpec:
    files = max(min_files, round(size_mb * 1e6 / (docs_per_file * BYTES_PER_DOC)))
    return CorpusSpec(files=files, docs_per_file=docs_per_file)

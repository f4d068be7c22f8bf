"""Where modules of the package lived before it was grouped by role: each old name imports as the very module
object of its new home, so code written against the old paths keeps working (and pickles stay loadable)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType

#: Old module (or package) -> its new home. A package's submodules follow it.
MOVED = {
    "curator_slurm.backends.results": "curator_slurm.runs.results",
    "curator_slurm.backends.signals": "curator_slurm.runs.signals",
    "curator_slurm.chain": "curator_slurm.workflows.chain",
    "curator_slurm.cli_parser": "curator_slurm.cli.parser",
    "curator_slurm.dedup": "curator_slurm.workflows.dedup",
    "curator_slurm.positions": "curator_slurm.stages.positions",
    "curator_slurm.sample": "curator_slurm.samples.corpus",
    "curator_slurm.shuffle": "curator_slurm.workflows.shuffle",
    "curator_slurm.steps": "curator_slurm.runs.steps",
    "curator_slurm.tokenization": "curator_slurm.workflows.tokenization",
    "curator_slurm.web_sample": "curator_slurm.samples.web",
    "curator_slurm.workflow": "curator_slurm.workflows.workflow",
    "curator_slurm.stages._kernels": "curator_slurm.stages.text.compute",
    "curator_slurm.stages.constants": "curator_slurm.stages.text.constants",
    "curator_slurm.stages.datatrove._text": "curator_slurm.stages.text.split",
    "curator_slurm.stages.datatrove._words": "curator_slurm.stages.text.spacy_words",
    "curator_slurm.stages.datatrove.base": "curator_slurm.stages.filters.decide",
    "curator_slurm.stages.datatrove.c4": "curator_slurm.stages.filters.quality.c4",
    "curator_slurm.stages.datatrove.fineweb": "curator_slurm.stages.filters.quality.fineweb",
    "curator_slurm.stages.datatrove.gopher": "curator_slurm.stages.filters.quality.gopher",
    "curator_slurm.stages.datatrove.pii": "curator_slurm.stages.modifiers.pii",
    "curator_slurm.stages.datatrove.sampler": "curator_slurm.stages.filters.sampler",
    "curator_slurm.stages.datatrove.url": "curator_slurm.stages.filters.url",
    "curator_slurm.stages.extract_justext": "curator_slurm.stages.extractors.justext",
    "curator_slurm.stages.fasttext": "curator_slurm.stages.filters.classifiers",
    "curator_slurm.stages.filters._chars": "curator_slurm.stages.text.chars",
    "curator_slurm.stages.filters._pieces": "curator_slurm.stages.text.pieces",
    "curator_slurm.stages.filters._shared": "curator_slurm.stages.filters.heuristic._shared",
    "curator_slurm.stages.filters.characters": "curator_slurm.stages.filters.heuristic.characters",
    "curator_slurm.stages.filters.lines": "curator_slurm.stages.filters.heuristic.lines",
    "curator_slurm.stages.filters.repetition": "curator_slurm.stages.filters.heuristic.repetition",
    "curator_slurm.stages.filters.substrings": "curator_slurm.stages.filters.heuristic.substrings",
    "curator_slurm.stages.filters.words": "curator_slurm.stages.filters.heuristic.words",
    "curator_slurm.stages.ids": "curator_slurm.stages.modifiers.ids",
    "curator_slurm.stages.jsonl": "curator_slurm.stages.io.jsonl",
    "curator_slurm.stages.jsonl_errors": "curator_slurm.stages.io.jsonl_errors",
    "curator_slurm.stages.language": "curator_slurm.stages.filters.language",
    "curator_slurm.stages.megatron": "curator_slurm.stages.io.megatron",
    "curator_slurm.stages.megatron_format": "curator_slurm.stages.io.megatron_format",
    "curator_slurm.stages.partitioning": "curator_slurm.stages.io.partitioning",
    "curator_slurm.stages.readers": "curator_slurm.stages.io.readers",
    "curator_slurm.stages.warc": "curator_slurm.stages.io.warc",
    "curator_slurm.stages.warc_records": "curator_slurm.stages.io.warc_records",
    "curator_slurm.stages.writers": "curator_slurm.stages.io.writers",
}


def new_home(name: str) -> str | None:
    """The module that the old name ``name`` now is, or None when ``name`` did not move."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name and loads it as the module of its new home (``python -m`` runs that module's code)."""

    def __init__(self, new: str = "") -> None:
        self.new = new
        self._spec: ModuleSpec | None = None

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        new = new_home(fullname)
        if new is None:
            return None
        real = importlib.util.find_spec(new)
        if real is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new), origin=real.origin)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the import machinery set the alias's spec on the real module: undo it
        sys.modules.setdefault(self.new, module)

    def get_code(self, fullname: str) -> CodeType | None:
        real = importlib.util.find_spec(self.new)
        loader = real.loader if real is not None else None
        return loader.get_code(self.new) if isinstance(loader, importlib.abc.InspectLoader) else None


def install() -> None:
    """Put the finder of old names first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())

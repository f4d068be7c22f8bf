"""Modules imported on first use, so that a process that never needs them (an array task with no
work, `curator-slurm shard`) does not pay for importing them."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule(ModuleType):
    """Stands in for a module until one of its attributes is used; then imports it and caches each
    attribute on itself, so later uses cost a plain attribute lookup."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._module is None:
            self._module = importlib.import_module(self.__name__)
        value = getattr(self._module, attr)
        setattr(self, attr, value)
        return value

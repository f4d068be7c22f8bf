"""Executors by name: the ones this package has, and any a user registers, built on demand."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, overload

from curator_slurm.backends.run import BaseExecutor


class FactoryFunction(Protocol):
    """``factory(workers)`` -> an executor."""

    def __call__(self, workers: int | None, /) -> BaseExecutor: ...


#: ``factory(workers)`` -> an executor; or ``"module:Class"``, imported on first use (Ray only when asked for).
Factory = FactoryFunction | str

_REGISTRY: dict[str, Factory | type[BaseExecutor]] = {
    "local": "curator_slurm.backends.local:LocalExecutor",
    "ray": "curator_slurm.backends.ray:RayExecutor",
}


def register_executor(name: str, factory: Factory | type[BaseExecutor]) -> None:
    """Make ``make_executor(name)`` (and ``--executor name`` in the examples) build ``factory``: an executor
    class (built with ``cls.for_workers(workers)``), a function of ``workers``, or ``"module:Class"``."""
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"executor name {name!r}: use letters, digits, '-' and '_'")
    _REGISTRY[name] = factory


def make_executor(name: str = "local", workers: int | None = None) -> BaseExecutor:
    """The executor called ``name`` with ``workers`` processes or CPUs (default: the CPUs this process may use):
    ``"local"`` (:class:`LocalExecutor`), ``"ray"`` (``RayExecutor``; Ray is imported only then, and without the
    ``[ray]`` extra this fails at once with the pip command), or one registered with :func:`register_executor`."""
    if name not in _REGISTRY:
        raise ValueError(f"executor {name!r}: use one of {', '.join(_REGISTRY)} (or register it: register_executor)")
    factory = _REGISTRY[name]
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    if isinstance(factory, type) and issubclass(factory, BaseExecutor):
        return factory.for_workers(workers)
    return factory(workers)


class _Names(Sequence[str]):
    """The registered executor names, live (for ``argparse``'s ``choices``)."""

    def __len__(self) -> int:
        return len(_REGISTRY)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return tuple(_REGISTRY)[index]

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_REGISTRY))

    def __eq__(self, other: object) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, Sequence) else NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


#: The executors :func:`make_executor` knows, by name (registered ones included, as they are registered).
EXECUTORS: Sequence[str] = _Names()

__all__ = ["EXECUTORS", "Factory", "FactoryFunction", "make_executor", "register_executor"]

"""What a stage's code is, for the run fingerprint: a digest of the source of every user-defined class and
function a stage is made of (its class and bases, the filters, modifiers and callables it holds)."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import sysconfig
import types
from collections.abc import Mapping
from typing import Any

import xxhash

from curator_slurm.stages.params import RUN_SETTINGS, excluded_attributes

#: Where installed packages and the standard library live: code there is versioned by its package, not
#: digested (this package's own code counts through its version, in the fingerprint).
_INSTALLED = tuple(
    os.path.realpath(p) + os.sep
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)
_OWN = "curator_slurm"


def code_digests(stage: Any) -> dict[str, str]:
    """Each user-defined class and function that ``stage`` is made of, by its qualified name (not its module:
    a class moved elsewhere unchanged is the same code), with a digest of its source; empty for a stage made
    only of this package's and installed packages' code."""
    found: dict[str, str] = {}
    _visit(stage, found, set(), 0, top=True)
    return dict(sorted(found.items()))


def _visit(value: Any, found: dict[str, str], seen: set[int], depth: int, top: bool = False) -> None:
    if depth > 8 or id(value) in seen or value is None or isinstance(value, (str, bytes, int, float, bool)):
        return
    seen.add(id(value))
    if isinstance(value, functools.partial):
        for part in (value.func, *value.args, *value.keywords.values()):
            _visit(part, found, seen, depth + 1)
    elif isinstance(value, types.MethodType):
        _visit(value.__func__, found, seen, depth + 1)
    elif isinstance(value, types.FunctionType):
        _add(value, found)
        for cell in value.__closure__ or ():
            try:
                _visit(cell.cell_contents, found, seen, depth + 1)
            except ValueError:  # a cell not filled yet
                continue
    elif isinstance(value, type):
        _add_class(value, found)
    elif isinstance(value, Mapping):
        for item in value.values():
            _visit(item, found, seen, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            _visit(item, found, seen, depth + 1)
    elif hasattr(value, "__dict__"):
        cls = type(value)
        _add_class(cls, found)
        module = cls.__module__ or ""
        if not (_is_user_code(module) or module.startswith(_OWN)):
            return  # an installed package's object (a model, a tokenizer): versioned by its package
        skip = excluded_attributes(cls) | (RUN_SETTINGS if top else frozenset())
        for name, item in vars(value).items():
            if name not in skip:
                _visit(item, found, seen, depth + 1)


def _add_class(cls: type, found: dict[str, str]) -> None:
    for klass in cls.__mro__:
        _add(klass, found)


def _add(obj: Any, found: dict[str, str]) -> None:
    """The digest of ``obj`` (a class or function) when it is user code."""
    module = getattr(obj, "__module__", None) or ""
    if not _is_user_code(module):
        return
    name = getattr(obj, "__qualname__", type(obj).__qualname__)
    digest = _digest(obj)
    if name in found and digest not in found[name].split("+"):  # two of one name from two modules: both count
        digest = "+".join(sorted([*found[name].split("+"), digest]))
    found[name] = digest


def _is_user_code(module: str) -> bool:
    if module == _OWN or module.startswith(_OWN + ".") or module in ("builtins", "abc", "typing"):
        return False
    path = getattr(sys.modules.get(module), "__file__", None)
    if path is None:
        return module == "__main__"  # a script run by `python -c` or a notebook: still the user's
    return not os.path.realpath(path).startswith(_INSTALLED)


def _digest(obj: Any) -> str:
    """xxh64 of the source of ``obj`` (with a function's constants); of its compiled code where the source
    cannot be had (an interactive session), which still changes when the code does."""
    try:
        text = inspect.getsource(obj).encode("utf-8", "surrogateescape")
        if isinstance(obj, types.FunctionType):  # two lambdas on one line share it: their constants tell them apart
            text += repr(obj.__code__.co_consts).encode("utf-8", "replace")
    except (OSError, TypeError):
        codes = [obj.__code__] if hasattr(obj, "__code__") else []
        if isinstance(obj, type):
            codes += [f.__code__ for _, f in sorted(vars(obj).items()) if hasattr(f, "__code__")]
        text = b"".join(c.co_code + repr(c.co_consts).encode("utf-8", "replace") for c in codes)
    return xxhash.xxh64_hexdigest(text, seed=0)


__all__ = ["code_digests"]

"""A stage's parameters as the run fingerprint records them: plain JSON that is the same in every process, on every
host and under every ``PYTHONHASHSEED`` (:func:`stage_params`, :func:`fingerprint_params`); a value with no stable
form is refused naming the stage and attribute. Design: docs/design.md, section Stage parameters and notes."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import json
import os
import re
import sys
import types
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from ..errors import FingerprintError

#: How run fingerprints are computed; recorded in each one, so a run directory written by a version that
#: computed them otherwise is refused with a message naming the change, not a list of differences.
#: 1: stages identified by module path, values by ``repr``; 2: stages by their name and canonical params.
FINGERPRINT_SCHEME = 2

#: Settings that change how a stage runs, not what it produces: changing them keeps a run resumable.
RUN_SETTINGS = frozenset({"is_source_stage", "is_sink_stage", "resources", "batch_size", "max_retries"})

#: A container whose canonical JSON is longer than this is recorded by its size and digest, so a filter
#: holding a word list of a million entries does not put them all into run.json and plan.json.
MAX_INLINE_CHARS = 2048

_FIX = (
    "Keep settings as plain values (str, numbers, bool, None, lists, dicts, sets) or objects made of them; "
    "load models and other resources in setup(), or list the attribute in the class's fingerprint_exclude if "
    "it does not change the output (a cache); or override params() to return what defines the output"
)


def excluded_attributes(cls: type) -> frozenset[str]:
    """The attributes that ``cls`` and its bases list in ``fingerprint_exclude`` (caches, loaded resources)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        names.update(klass.__dict__.get("fingerprint_exclude", ()))
    return frozenset(names)


def stage_label(stage: Any) -> str:
    return f"stage {getattr(stage, 'name', '?')!r} ({type(stage).__qualname__})"


def stage_params(stage: Any) -> dict[str, Any]:
    """The parameters of ``stage``: every instance attribute (or what its ``__getstate__`` returns), private
    ones too (NeMo Curator's stages keep theirs as ``self._max_chars``), except the settings that cannot
    change results (:data:`RUN_SETTINGS`) and those its class lists in ``fingerprint_exclude``; each value
    canonicalised."""
    excluded = RUN_SETTINGS | excluded_attributes(type(stage))
    label = stage_label(stage)
    return {key: canonical(value, label, key) for key, value in sorted(_state(stage).items()) if key not in excluded}


#: ``object``'s own ``__getstate__``, which every class inherits from Python 3.11 on (3.10's ``object`` has none).
_OBJECT_GETSTATE = getattr(object, "__getstate__", None)


def _state(value: Any) -> dict[str, Any]:
    """The attributes of ``value``; a class that defines ``__getstate__`` returning a dict (to leave a loaded
    model out of what workers receive, say) is taken at its word: that is what the object is made of."""
    getstate = getattr(type(value), "__getstate__", None)
    if getstate is not None and getstate is not _OBJECT_GETSTATE:
        state = value.__getstate__()
        if isinstance(state, dict):
            return state
    return dict(getattr(value, "__dict__", None) or {})


def fingerprint_params(stage: Any) -> dict[str, Any]:
    """What the run fingerprint records of ``stage``: its ``params()`` (a stage that overrides it says itself
    what defines its output), canonicalised."""
    params = stage.params()
    if not isinstance(params, Mapping):
        raise FingerprintError(f"{stage_label(stage)}: params() returned {type(params).__name__}, not a dict")
    label = stage_label(stage)
    return {str(key): canonical(value, label, str(key)) for key, value in sorted(params.items(), key=_key_text)}


def canonical(value: Any, label: str = "a value", path: str = "", _seen: frozenset[int] = frozenset()) -> Any:
    """A JSON value that stands for ``value`` and is the same in every process; raises
    :class:`FingerprintError` naming ``label`` (the stage) and ``path`` (the attribute) when there is none."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, np.generic):
        return canonical(value.item(), label, path, _seen)
    if id(value) in _seen:  # an object that refers back to itself (e.g. a bound method of the stage)
        return f"<cycle: {type(value).__qualname__}>"
    seen = _seen | {id(value)}
    for kind, convert in _CONVERTERS:
        if isinstance(value, kind):
            return convert(value, label, path, seen)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if _is_stage(value):
        return _stage(value, label, path, seen)
    filesystems = sys.modules.get("pyarrow.fs")  # not imported for this: most runs never import it
    if filesystems is not None and isinstance(value, filesystems.FileSystem):
        return {"filesystem": value.type_name}  # where data lives, not what a stage does
    if callable(value) and isinstance(getattr(value, "__qualname__", None), str) and not hasattr(value, "__dict__"):
        return _builtin(value, label, path, seen)  # builtins and method descriptors: str.lower, len, ...
    return _object(value, label, path, seen)


def _key_text(item: tuple[Any, Any]) -> str:
    return str(item[0])


def _small(value: Any, kind: str, count: int) -> Any:
    """``value``, or its size and digest when its JSON is too long to keep in run.json."""
    text = json.dumps(value, sort_keys=True, default=str)
    if len(text) <= MAX_INLINE_CHARS:
        return value
    return f"<{kind} of {count} items, xxh64 {xxhash.xxh64_hexdigest(text.encode('utf-8'))}>"


def _sorted(items: list[Any]) -> list[Any]:
    if all(isinstance(i, str) for i in items):
        return sorted(items)
    return sorted(items, key=lambda i: json.dumps(i, sort_keys=True, default=str))


def _sequence(value: Any, label: str, path: str, seen: frozenset[int]) -> Any:
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a NamedTuple: by its field names
        return {"type": type(value).__qualname__, "fields": canonical(value._asdict(), label, path, seen)}
    items = [canonical(v, label, f"{path}[{i}]", seen) for i, v in enumerate(value)]
    return _small(items, type(value).__name__, len(items))


def _set(value: Any, label: str, path: str, seen: frozenset[int]) -> Any:
    items = _sorted([canonical(v, label, f"{path}{{...}}", seen) for v in value])
    return _small(items, type(value).__name__, len(items))


def _mapping(value: Mapping[Any, Any], label: str, path: str, seen: frozenset[int]) -> Any:
    pairs = [(canonical(k, label, f"{path}[key]", seen), v) for k, v in value.items()]
    if all(isinstance(k, str) for k, _ in pairs):
        out: Any = {k: canonical(v, label, f"{path}[{k!r}]", seen) for k, v in sorted(pairs, key=_key_text)}
    else:
        out = _sorted([[k, canonical(v, label, f"{path}[{k!r}]", seen)] for k, v in pairs])
    return _small(out, "dict", len(pairs))


def _bytes(value: Any, label: str, path: str, seen: frozenset[int]) -> Any:
    data = bytes(value)
    if len(data) <= 64:
        return {"bytes": data.hex()}
    return {"bytes": len(data), "xxh64": xxhash.xxh64_hexdigest(data)}


def _ndarray(value: np.ndarray, label: str, path: str, seen: frozenset[int]) -> Any:
    if value.dtype.hasobject:
        return canonical(value.tolist(), label, path, seen)
    data = np.ascontiguousarray(value).tobytes()
    return {"ndarray": str(value.dtype), "shape": list(value.shape), "xxh64": xxhash.xxh64_hexdigest(data)}


def _function(value: types.FunctionType, label: str, path: str, seen: frozenset[int]) -> Any:
    """A function by module and qualified name, plus the values it captured and its defaults (so that
    ``make_truncate(100)`` and ``make_truncate(200)`` differ); not by address, which differs per process."""
    name = f"{value.__module__}.{value.__qualname__}"
    captured = []
    for i, cell in enumerate(value.__closure__ or ()):
        try:
            contents = cell.cell_contents
        except ValueError:  # a cell not filled yet
            contents = None
        captured.append(canonical(contents, label, f"{path}.__closure__[{i}]", seen))
    defaults = canonical(value.__defaults__, label, f"{path}.__defaults__", seen) if value.__defaults__ else None
    keyword = canonical(value.__kwdefaults__, label, f"{path}.__kwdefaults__", seen) if value.__kwdefaults__ else None
    if not captured and defaults is None and keyword is None:
        return name
    return {"function": name, "captured": captured, "defaults": defaults, "kwdefaults": keyword}


def _method(value: types.MethodType, label: str, path: str, seen: frozenset[int]) -> Any:
    return {"method": canonical(value.__func__, label, path, seen), "of": canonical(value.__self__, label, path, seen)}


def _partial(value: functools.partial, label: str, path: str, seen: frozenset[int]) -> Any:
    return {
        "partial": canonical(value.func, label, f"{path}.func", seen),
        "args": canonical(value.args, label, f"{path}.args", seen),
        "keywords": canonical(value.keywords, label, f"{path}.keywords", seen),
    }


def _builtin(value: Any, label: str, path: str, seen: frozenset[int]) -> Any:
    owner = getattr(value, "__objclass__", None)
    module = getattr(value, "__module__", None) or getattr(owner, "__module__", "builtins")
    name = f"{module}.{value.__qualname__}"
    bound = getattr(value, "__self__", None)
    if bound is None or isinstance(bound, types.ModuleType):
        return name
    return {"method": name, "of": canonical(bound, label, path, seen)}


def _stage(value: Any, label: str, path: str, seen: frozenset[int]) -> Any:
    """A stage held by another stage, by its name and its own parameters (its ``params()``)."""
    params = value.params()
    return {"stage": value.name, "params": canonical(params, label, path, seen)}


def _object(value: Any, label: str, path: str, seen: frozenset[int]) -> Any:
    """An object (a filter, a modifier, a dataclass, a settings object) by its class name and its
    attributes, private ones too, except those its class lists in ``fingerprint_exclude``; refused when it
    has no attributes to show (an extension type whose only form is a repr with its memory address)."""
    cls = type(value)
    excluded = excluded_attributes(cls)
    if dataclasses.is_dataclass(value):
        attributes = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    else:
        attributes = _state(value)
        for klass in cls.__mro__:
            for slot in klass.__dict__.get("__slots__", ()):
                if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                    attributes.setdefault(slot, getattr(value, slot))
    if not attributes and not hasattr(value, "__dict__"):
        where = f"{label} attribute {path}" if path else label
        raise FingerprintError(
            f"{where} holds {_short_repr(value)} ({cls.__module__}.{cls.__qualname__}), which has no attributes "
            f"to describe it the same way in every process, so the run fingerprint cannot include it. {_FIX}."
        )
    return {
        "type": cls.__qualname__,
        "attributes": {
            k: canonical(v, label, f"{path}.{k}" if path else k, seen)
            for k, v in sorted(attributes.items())
            if k not in excluded
        },
    }


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken repr must not hide the real error
        text = f"<{type(value).__qualname__}>"
    return text if len(text) <= 80 else text[:77] + "..."


#: The classes whose instances are described by their name and ``params()`` when another stage holds one:
#: ``ProcessingStage`` adds itself (base imports this module, so this module cannot import base).
STAGE_CLASSES: list[type] = []


def _is_stage(value: Any) -> bool:
    return isinstance(value, tuple(STAGE_CLASSES))


def _text(value: Any, label: str, path: str, seen: frozenset[int]) -> Any:
    return str(value)


_CONVERTERS: list[tuple[Any, Any]] = [
    (os.PathLike, lambda v, *_: os.fspath(v)),
    ((bytes, bytearray, memoryview), _bytes),
    ((list, tuple), _sequence),
    ((set, frozenset), _set),
    (Mapping, _mapping),
    (
        re.Pattern,
        lambda v, *_: {"regex": v.pattern if isinstance(v.pattern, str) else v.pattern.hex(), "flags": v.flags},
    ),
    (np.ndarray, _ndarray),
    (pa.DataType, _text),
    (pa.Field, lambda v, *_: [v.name, str(v.type), v.nullable]),
    (pa.Schema, lambda v, *_: [[f.name, str(f.type), f.nullable] for f in v]),
    ((datetime.date, datetime.time, datetime.timedelta, decimal.Decimal, fractions.Fraction, uuid.UUID), _text),
    (complex, lambda v, *_: [v.real, v.imag]),
    (range, lambda v, *_: {"range": [v.start, v.stop, v.step]}),
    (types.ModuleType, lambda v, *_: {"module": v.__name__}),
    (functools.partial, _partial),
    (types.MethodType, _method),
    (types.FunctionType, _function),
]

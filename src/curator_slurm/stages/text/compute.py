"""Arrow compute kernels called by name through ``pyarrow._compute.call_function``, without importing
``pyarrow.compute`` (about 35 ms of CPU in every process). Design: docs/design.md, section Filters."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from curator_slurm._lazy import LazyModule

_compute = LazyModule("pyarrow._compute")


#: The Arrow type pyarrow infers for each Python scalar type. Giving it explicitly matters: inferring
#: it tries to import ``dateutil`` on every call, and a module that is not installed is searched for
#: along all of ``sys.path`` each time (about 0.2 ms; 2-3 % of the demo job's CPU).
_SCALAR_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


#: Python's whitespace (``str.isspace``) as the body of an RE2 character class: RE2's ``\s`` alone is
#: ASCII-only, so a pattern that must split or strip as Python does spells the class out.
RE2_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"


def re2_literal(text: str) -> str:
    """``text`` as an RE2 pattern matching itself (metacharacters escaped; RE2 refuses some of the
    escapes Python's ``re.escape`` adds)."""
    return "".join("\\" + c if c in "\\.^$|?*+()[]{}" else c for c in text)


def _arg(value: Any) -> Any:
    to = _SCALAR_TYPES.get(type(value))
    return value if to is None else pa.scalar(value, type=to)


def call(name: str, *args: Any, options: Any = None) -> Any:
    """The kernel ``name`` (as ``pyarrow.compute.call_function`` names it) on ``args``; Python booleans,
    numbers and strings become Arrow scalars of the types pyarrow would infer."""
    return _compute.call_function(name, [_arg(a) for a in args], options)


def cast(values: Any, to: pa.DataType) -> Any:
    """``values`` as ``to``, refusing lossy conversions (as ``Array.cast`` does by default)."""
    return call("cast", values, options=_compute.CastOptions.safe(to))


def replace_regex(values: Any, pattern: str, replacement: str) -> Any:
    """Every match of the RE2 ``pattern`` in each string replaced by ``replacement``."""
    return call("replace_substring_regex", values, options=_compute.ReplaceSubstringOptions(pattern, replacement))


def filter_table(table: pa.Table, mask: Any) -> pa.Table:
    """The rows of ``table`` where ``mask`` is true (a null drops the row, as ``Table.filter`` does)."""
    return call("filter", table, mask)


def match_substring(values: Any, pattern: str, regex: bool = False) -> Any:
    """Whether each string contains ``pattern`` (an RE2 pattern when ``regex``)."""
    options = _compute.MatchSubstringOptions(pattern)
    return call("match_substring_regex" if regex else "match_substring", values, options=options)


def starts_or_ends_with(values: Any, pattern: str, end: bool) -> Any:
    """Whether each string starts (or, with ``end``, ends) with the literal ``pattern``."""
    return call("ends_with" if end else "starts_with", values, options=_compute.MatchSubstringOptions(pattern))


def split_pattern(values: Any, pattern: str) -> Any:
    """Each string split at every (non-overlapping) occurrence of the literal ``pattern``, as
    ``str.split(pattern)`` splits it."""
    return call("split_pattern", values, options=_compute.SplitPatternOptions(pattern))


def split_pattern_regex(values: Any, pattern: str) -> Any:
    """Each string split at every match of the RE2 ``pattern``, as ``re.split(pattern, text)`` splits it
    (a pattern without groups)."""
    return call("split_pattern_regex", values, options=_compute.SplitPatternOptions(pattern))


def count_substring(values: Any, pattern: str, regex: bool = False) -> Any:
    """How many non-overlapping occurrences of ``pattern`` (literal, ``str.count``; an RE2 pattern when
    ``regex``) each string holds."""
    options = _compute.MatchSubstringOptions(pattern)
    return call("count_substring_regex" if regex else "count_substring", values, options=options)


def is_in(values: Any, among: pa.Array) -> Any:
    """Whether each value is one of ``among`` (an array of the values' type)."""
    return call("is_in", values, options=_compute.SetLookupOptions(among))


def to_numpy(array: Any) -> Any:
    """A numpy copy-free view of a null-free Arrow array of integers, floats or booleans, read from its
    buffers; anything else through ``to_numpy``. pyarrow 14's ``to_numpy`` looks for pandas on every call,
    which, where pandas is not installed, is a search along all of ``sys.path`` each time."""
    import numpy as np

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    kind = array.type
    if array.null_count == 0 and (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        dtype = np.dtype(f"{'f' if pa.types.is_floating(kind) else 'u' if pa.types.is_unsigned_integer(kind) else 'i'}"
                         f"{kind.bit_width // 8}")  # fmt: skip
        return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)
    if array.null_count == 0 and pa.types.is_boolean(kind):
        bits = np.unpackbits(np.frombuffer(array.buffers()[1], dtype=np.uint8), bitorder="little")
        return bits[array.offset : array.offset + len(array)].astype(bool)
    return array.to_numpy(zero_copy_only=False)


def from_numpy(values: Any, type_: pa.DataType) -> pa.Array:
    """An Arrow array of ``type_`` (integer, floating or boolean) made from a numpy array's buffer; pyarrow
    14's ``pa.array(ndarray)`` looks for pandas on every call (see :func:`to_numpy`)."""
    import numpy as np

    if pa.types.is_boolean(type_):
        flags = np.asarray(values, dtype=bool)
        packed = np.packbits(flags, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(flags), [None, pa.py_buffer(packed)])
    if pa.types.is_integer(type_) or pa.types.is_floating(type_):
        kind = "f" if pa.types.is_floating(type_) else "u" if pa.types.is_unsigned_integer(type_) else "i"
        data = np.ascontiguousarray(values, dtype=f"{kind}{type_.bit_width // 8}")
        return pa.Array.from_buffers(type_, len(data), [None, pa.py_buffer(data)])
    return pa.array(values, type=type_)

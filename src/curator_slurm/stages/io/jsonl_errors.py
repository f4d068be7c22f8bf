"""Naming the line of a JSONL file that pyarrow refused to read: the same bytes read again line by line, to find the
first line that is not UTF-8, not a JSON object, or does not fit the schema, and say how to fix it."""

from __future__ import annotations

import json

import pyarrow as pa

from curator_slurm import fs


class _RepeatedKey(Exception):
    """A JSON object names one key twice (pyarrow refuses it; Python's json would keep the last silently)."""


def _no_repeated_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return record


#: The JSON kind of a parsed value, by its Python type (booleans and numbers apart: a bool is an int).
_KINDS: dict[type, str] = {str: "string", list: "array", dict: "object"}


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return _KINDS.get(type(value), "null")


def _declared_kind(type_: pa.DataType) -> str:
    """The JSON kind of value that a declared Arrow type is read from."""
    if pa.types.is_boolean(type_):
        return "boolean"
    if pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_):
        return "number"
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return "array"
    if pa.types.is_struct(type_) or pa.types.is_map(type_):
        return "object"
    return "string"  # strings, and timestamps and dates written as text


def locate_jsonl_error(
    path: str, data: bytes | None = None, first_line: int = 1, schema: pa.Schema | None = None
) -> str | None:
    """Find the first line pyarrow refused, for a message that names it (only called on failure):
    invalid UTF-8, malformed JSON, a line that is not an object, a field that changes type, or one that
    does not fit the declared ``schema``. ``data`` is the part of the file that was read, if not all
    of it, starting on line ``first_line``."""
    if data is None:
        with fs.open_decompressed(path) as stream:
            data = stream.read()
    declared = {f.name: f.type for f in schema} if schema is not None else {}
    first_kind: dict[str, tuple[str, int]] = {name: (_declared_kind(t), 0) for name, t in declared.items()}
    for lineno, raw in enumerate(data.split(b"\n"), start=first_line):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"{path}:{lineno}: not valid UTF-8 ({e.reason} at byte {e.start}); re-encode the file as UTF-8"
        try:
            record = json.loads(line, object_pairs_hook=_no_repeated_keys)
        except json.JSONDecodeError as e:
            return f"{path}:{lineno}: malformed JSON ({e.msg} at column {e.colno}); fix or remove that line"
        except _RepeatedKey as e:
            return f"{path}:{lineno}: field {e.args[0]!r} appears twice in one record; keep one of them"
        if not isinstance(record, dict):
            return f"{path}:{lineno}: not a JSON object (a {_json_kind(record)}); each line must be one object"
        for key, value in record.items():
            kind = _json_kind(value)
            if kind == "null":
                continue
            seen = first_kind.setdefault(key, (kind, lineno))
            if seen[0] != kind and seen[1] == 0:
                return (
                    f"{path}:{lineno}: field {key!r} is a {kind} here but the reader's schema declares "
                    f"{declared[key]}; fix the line or the schema"
                )
            if seen[0] != kind and {seen[0], kind} != {"number"}:
                return (
                    f"{path}:{lineno}: field {key!r} is a {kind} here but a {seen[0]} on line {seen[1]}; "
                    "make the field's type consistent"
                )
    return None


def line_number(path: str, offset: int) -> int:
    """The 1-based number of the line that starts at byte ``offset`` (for error messages only)."""
    count, left = 1, offset
    with fs.open_input(path) as f:
        while left > 0:
            chunk = f.read(min(left, 16 << 20))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count

"""What readers make of their options: the source-file column and a ``schema`` given as a mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import pyarrow as pa

#: The column in which readers name each document's source file (datatrove keeps it as ``metadata.file_path``):
#: its path relative to the reader's input root, local or on an object store alike (as datatrove's is relative
#: to its data folder). A document that already has it (read from an earlier phase's output) keeps its own.
FILE_PATH = "file_path"

#: A reader's ``schema``: a pyarrow schema, or field name -> pyarrow type or type name ("int64").
SchemaLike: TypeAlias = "pa.Schema | Mapping[str, pa.DataType | str]"


def to_schema(schema: SchemaLike) -> pa.Schema:
    """A pyarrow schema from a schema or a mapping of field names to types or type names; an unknown
    type name is a ValueError naming the field."""
    if isinstance(schema, pa.Schema):
        return schema
    fields = []
    for name, type_ in schema.items():
        if isinstance(type_, str):
            try:
                type_ = pa.type_for_alias(type_)
            except ValueError:
                raise ValueError(
                    f"schema field {name!r}: unknown type {type_!r}; use a pyarrow type or a name such as "
                    "'string', 'int64', 'float64', 'bool' or 'timestamp[s]'"
                ) from None
        fields.append(pa.field(name, type_))
    return pa.schema(fields)


def check_file_path_field(name: Any) -> str | None:
    """A reader's ``file_path_field``: a column name, or None for no source-file column."""
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"file_path_field={name!r}: give a column name (default 'file_path'), or None for none")
    return name

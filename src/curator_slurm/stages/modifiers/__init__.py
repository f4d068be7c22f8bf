"""Document modifiers (NeMo Curator's names, parameters, defaults and results) and the :class:`Modify` stage that
applies them: text in, changed text out. Design: docs/design.md, section Filters (Modifiers)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from ...errors import InputError
from ...tasks import DocumentBatch
from ..base import PASSTHROUGH, ProcessingStage
from .base import DocumentModifier, FunctionModifier, modifier_name
from .boilerplate import BoilerPlateStringModifier
from .cleaning import LineRemover, MarkdownRemover, NewlineNormalizer, QuotationRemover, Slicer, UrlRemover
from .unicode import UnicodeReformatter

ModifierLike = DocumentModifier | Callable[[str], str]


def _as_modifier(m: object) -> DocumentModifier:
    """``m`` (what the user gave as a modifier: checked here) as a modifier."""
    if isinstance(m, DocumentModifier):
        return m
    if isinstance(m, type) and issubclass(m, DocumentModifier):
        raise TypeError(f"Modify needs a modifier instance, got the class {m.__name__}; write {m.__name__}()")
    if callable(m):
        return FunctionModifier(m)
    raise TypeError("Each modifier must be a DocumentModifier or callable")


# The checks below are NeMo Curator's, with its exception types and words: a script that catches them keeps working.
def _field_lists(input_fields: Any, count: int) -> list[list[str]]:
    """One list of input fields per modifier, from NeMo Curator's three forms: a field for every
    modifier, one field per modifier, or one list of fields per modifier."""
    if isinstance(input_fields, str):
        groups: list[list[str]] = [[input_fields]] * count
    elif isinstance(input_fields, (list, tuple)) and all(isinstance(i, str) for i in input_fields):
        if len(input_fields) not in (1, count):
            raise ValueError(
                f"Number of input fields ({len(input_fields)}) must be 1 or equal to number of modifiers ({count}). "
                "For multi-input per modifier, pass a list of lists."
            )
        groups = [[f] for f in input_fields] * (count if len(input_fields) == 1 else 1)
    elif isinstance(input_fields, (list, tuple)) and all(isinstance(i, (list, tuple)) for i in input_fields):
        if len(input_fields) not in (1, count):
            raise ValueError(
                f"Number of input field groups ({len(input_fields)}) must be 1 or equal to number of modifiers "
                f"({count})"
            )
        groups = [list(g) for g in input_fields] * (count if len(input_fields) == 1 else 1)
    else:
        raise TypeError("input_fields must be str, list[str], or list[list[str]]")
    if any(not g or any(not isinstance(f, str) or not f for f in g) for g in groups):
        raise ValueError(f"Modify(input_fields={input_fields!r}): each must be a field name")
    return [list(g) for g in groups]


def _in_place(fields: list[str]) -> str:
    if len(fields) == 1:
        return fields[0]
    raise ValueError(
        "Implicit in-place (None) not allowed for a modifier with multiple input fields. "
        "Provide an explicit output column."
    )


def _output_fields(output_fields: Any, inputs: list[list[str]]) -> list[str]:
    """One output field per modifier: None writes in place (a modifier of one field), a name for every
    modifier, or a list of one or one per modifier (None in it: in place)."""
    count = len(inputs)
    if output_fields is None:
        if any(len(fields) > 1 for fields in inputs):
            raise ValueError(
                "output_fields must be provided when any modifier has multiple input fields. "
                "Provide a single name to reuse or a list[str] with one name per modifier."
            )
        return [fields[0] for fields in inputs]
    if isinstance(output_fields, str):
        return [output_fields] * count
    if not isinstance(output_fields, (list, tuple)):
        raise TypeError("output_field must be str, list[str | None], or None")
    if len(output_fields) not in (1, count):
        raise ValueError(
            f"Number of output fields ({len(output_fields)}) must be 1 or equal to number of modifiers ({count})"
        )
    names = list(output_fields) * (count if len(output_fields) == 1 else 1)
    return [_in_place(fields) if name is None else name for name, fields in zip(names, inputs, strict=True)]


class Modify(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Apply document modifiers to fields, in order (NeMo Curator's ``Modify``). A later modifier sees what the
    earlier ones wrote. Rows are never dropped or reordered, so document positions (and :class:`~.ids.AddId`)
    still work after a Modify.

    Args:
        modifier_fn: a :class:`DocumentModifier`, a function, or a list of them.
        input_fields: one field for all, one per modifier, or one list of fields per modifier; a modifier with
            several fields gets them as keyword arguments (``modify_document(title=..., text=...)``) and needs
            an output field.
        output_fields: None to change the (single) input field in place, else one field for all or one per
            modifier (None in the list: in place).
    """

    def __init__(
        self,
        modifier_fn: ModifierLike | Sequence[ModifierLike],
        input_fields: str | Sequence[str] | Sequence[Sequence[str]] = "text",
        output_fields: str | Sequence[str | None] | None = None,
    ) -> None:
        if input_fields is None:
            raise ValueError("Input field cannot be None")
        given = list(modifier_fn) if isinstance(modifier_fn, (list, tuple)) else [modifier_fn]
        if not given:
            raise ValueError("modifier_fn list cannot be empty")
        self.modifiers = [_as_modifier(m) for m in given]
        self.input_fields = _field_lists(input_fields, len(self.modifiers))
        self.output_fields = _output_fields(output_fields, self.input_fields)
        self.name = f"modify[{'+'.join(modifier_name(m) for m in self.modifiers)}]"

    def inputs(self) -> tuple[list[str], list[str]]:
        # A field that an earlier modifier of this stage writes is not needed from before it.
        needed: list[str] = []
        written: set[str] = set()
        for fields, output in zip(self.input_fields, self.output_fields, strict=True):
            needed.extend(f for f in fields if f not in written and f not in needed)
            written.add(output)
        return ["data"], needed

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, *dict.fromkeys(self.output_fields)]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        for modifier, fields, target in zip(self.modifiers, self.input_fields, self.output_fields, strict=True):
            missing = [f for f in fields if f not in table.column_names]
            if missing:
                where = task.where()
                raise InputError(
                    f"{where}: no field {missing[0]!r} for {type(modifier).__name__} to modify; the data has "
                    f"{table.column_names}. Set input_fields= to one of them."
                )
            if len(fields) > 1:
                records = table.select(fields).to_pylist()
                modified: Any = pa.array([modifier.modify_document(**r) for r in records])
            else:
                column = table.column(fields[0])
                # A column null in every row (JSON gives it the null type) has nothing to modify.
                modified = column if pa.types.is_null(column.type) else modifier.modify_array(column)
            if target in table.column_names:
                table = table.set_column(table.column_names.index(target), target, modified)
            else:
                table = table.append_column(target, modified)
        return task.derive(table)


__all__ = [
    "BoilerPlateStringModifier",
    "DocumentModifier",
    "FunctionModifier",
    "LineRemover",
    "MarkdownRemover",
    "ModifierLike",
    "Modify",
    "NewlineNormalizer",
    "QuotationRemover",
    "Slicer",
    "UnicodeReformatter",
    "UrlRemover",
]

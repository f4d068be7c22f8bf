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
    raise TypeError(f"Modify needs a DocumentModifier or a callable str -> str, got {m!r}")


def _per_modifier(value: Any, count: int, what: str) -> list[Any]:
    items = [value] if value is None or isinstance(value, str) else list(value)
    if len(items) == 1:
        return items * count
    if len(items) != count:
        raise ValueError(f"Modify({what}={value!r}): give one, or one per modifier ({count})")
    return items


def _field_lists(input_fields: str | Sequence[str] | Sequence[Sequence[str]], count: int) -> list[list[str]]:
    """One list of input fields per modifier, from NeMo Curator's three forms: a field for every
    modifier, one field per modifier, or one list of fields per modifier."""
    if isinstance(input_fields, str):
        groups: list[Any] = [[input_fields]] * count
    else:
        items = list(input_fields)
        if all(isinstance(i, str) for i in items):
            groups = _per_modifier([[i] for i in items], count, "input_fields")
        elif all(isinstance(i, (list, tuple)) for i in items):
            groups = _per_modifier([list(i) for i in items], count, "input_fields")
        else:
            raise TypeError(
                f"Modify(input_fields={input_fields!r}): give a field name, a list of names (one per modifier) "
                "or a list of lists (the fields of each modifier)"
            )
    if any(not g or any(not isinstance(f, str) or not f for f in g) for g in groups):
        raise ValueError(f"Modify(input_fields={input_fields!r}): each must be a field name")
    return [list(g) for g in groups]


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
        given = list(modifier_fn) if isinstance(modifier_fn, (list, tuple)) else [modifier_fn]
        if not given:
            raise ValueError("Modify(modifier_fn=[]): give at least one modifier")
        self.modifiers = [_as_modifier(m) for m in given]
        self.input_fields = _field_lists(input_fields, len(self.modifiers))
        outputs = _per_modifier(output_fields, len(self.modifiers), "output_fields")
        self.output_fields: list[str] = []
        for modifier, fields, output in zip(self.modifiers, self.input_fields, outputs, strict=True):
            if output is None and len(fields) > 1:
                name = modifier_name(modifier)
                raise ValueError(f"Modify: {name} reads {fields}, so it cannot write in place; give output_fields=")
            self.output_fields.append(output or fields[0])
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

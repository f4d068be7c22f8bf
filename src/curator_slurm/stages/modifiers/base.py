"""The modifier interface (:class:`DocumentModifier`), functions as modifiers, and the helpers the
modifier families share."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, ClassVar

import pyarrow as pa

from curator_slurm.stages.base import snake_case


@functools.cache
def regex(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``pattern`` compiled on first use: compiling every modifier's patterns at import would cost
    every process that imports the stages a few milliseconds."""
    return re.compile(pattern, flags)


def string_array(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous string array (kernels that build lists want one chunk)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if not pa.types.is_string(texts.type):
        texts = texts.cast(pa.string())
    return texts


class DocumentModifier:
    """Changes the text of documents.

    Implement :meth:`modify_document` (one ``str`` in, one ``str`` out); override :meth:`modify_array`
    too when a whole column can be changed faster at once (it must give what ``modify_document`` gives
    for each row). Null texts stay null. Keep every setting that changes the output in a public
    attribute: ``repr`` shows them. A :class:`Modify` stage's run fingerprint holds each modifier's class
    name and attributes, private ones too, except those listed in ``fingerprint_exclude`` (caches).

    A modifier's name (in the stage name ``modify[<name>]``, logs and the funnel) is its class name in snake
    case (``QuotationUnifier`` -> ``quotation_unifier``), as a filter's is, unless the class sets ``name`` or
    the instance sets ``name`` or NeMo's ``_name`` (:func:`modifier_name`).
    """

    name: str = "document_modifier"
    #: Attributes that do not change the output (caches built on first use): left out of the fingerprint.
    fingerprint_exclude: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = snake_case(cls.__name__)

    def modify_document(self, text: str) -> str:
        raise NotImplementedError(f"{type(self).__name__} must implement modify_document or modify_array")

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """The modified texts, one per input (nulls stay null); by default ``modify_document`` on each."""
        modify = self.modify_document
        return pa.array([None if t is None else modify(t) for t in texts.to_pylist()], type=pa.string())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()) if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


def modifier_name(m: DocumentModifier) -> str:
    """What ``m`` is called: the instance's own ``name`` (or NeMo's ``_name``) if it sets one, else its class's."""
    own = vars(m).get("name") or vars(m).get("_name")
    return own if isinstance(own, str) and own else m.name


class FunctionModifier(DocumentModifier):
    """A plain ``str -> str`` function as a modifier (what :class:`Modify` makes of a callable).

    Its ``repr`` and the run fingerprint name the function by module and qualified name (the fingerprint
    also holds the values a closure captured), not by its address, which differs from process to process:
    every shard of an array must agree on it.
    """

    def __init__(self, fn: Callable[[str], str]) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModifier needs a callable str -> str, got {fn!r}")
        self._fn = fn
        self.function = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
        self.name = getattr(fn, "__name__", type(fn).__name__)

    def modify_document(self, *args: Any, **fields: Any) -> Any:
        # One text, or (in a Modify with several input fields) each field as a keyword argument.
        return self._fn(*args, **fields)

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array:
        # A function may return something other than text (a length, a flag): Arrow infers its type.
        values = [None if t is None else self._fn(t) for t in texts.to_pylist()]
        if all(v is None or isinstance(v, str) for v in values):
            return pa.array(values, type=pa.string())
        return pa.array(values)

"""datatrove's formatters (``BaseFormatter``, ``FTFYFormatter``, ``SymbolLinesFormatter``): stages that rewrite
each document's text with ``format(text)``, under datatrove's names and parameters."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import pyarrow as pa

from ...extras import load, require
from ...tasks import DocumentBatch
from ..base import PASSTHROUGH, ProcessingStage
from ..filters.decide import set_column
from ..text.split import PUNCTUATION_SET


class BaseFormatter(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Rewrite ``text_field`` of every document with :meth:`format` (datatrove's ``BaseFormatter``); a null text
    stays null, every other field and every row are kept. Subclasses implement ``format``; their attributes are
    in the run fingerprint."""

    text_field: str = "text"

    def format(self, text: str) -> str:
        raise NotImplementedError(f"{type(self).__name__} must implement format(text)")

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        if self.text_field not in table.column_names:
            return task  # nothing to format (a batch with no text field, as an empty file gives)
        fmt = self.format
        texts = table.column(self.text_field).to_pylist()
        formatted = pa.array([None if t is None else fmt(t) for t in texts], pa.string())
        return task.derive(set_column(table, self.text_field, formatted))


class FTFYFormatter(BaseFormatter):
    """ftfy's ``fix_text`` with datatrove's settings (the ``unicode`` extra): encodings fixed, formats left.

    Args: the fields of ftfy's ``TextFixerConfig``, with datatrove's defaults.
    """

    name = "ftfy_formatter"
    requires = ("ftfy",)
    fingerprint_exclude = frozenset({"_fix"})

    def __init__(
        self,
        unescape_html: str | bool = "auto",
        remove_terminal_escapes: bool = True,
        fix_encoding: bool = True,
        restore_byte_a0: bool = True,
        replace_lossy_sequences: bool = True,
        decode_inconsistent_utf8: bool = True,
        fix_c1_controls: bool = True,
        fix_latin_ligatures: bool = False,
        fix_character_width: bool = False,
        uncurl_quotes: bool = False,
        fix_line_breaks: bool = False,
        fix_surrogates: bool = True,
        remove_control_chars: bool = True,
        normalization: str | None = None,
    ) -> None:
        require("ftfy", "FTFYFormatter", "unicode")
        self.settings = dict(
            unescape_html=unescape_html,
            remove_terminal_escapes=remove_terminal_escapes,
            fix_encoding=fix_encoding,
            restore_byte_a0=restore_byte_a0,
            replace_lossy_sequences=replace_lossy_sequences,
            decode_inconsistent_utf8=decode_inconsistent_utf8,
            fix_c1_controls=fix_c1_controls,
            fix_latin_ligatures=fix_latin_ligatures,
            fix_character_width=fix_character_width,
            uncurl_quotes=uncurl_quotes,
            fix_line_breaks=fix_line_breaks,
            fix_surrogates=fix_surrogates,
            remove_control_chars=remove_control_chars,
            normalization=normalization,
        )

    @cached_property
    def _fix(self) -> Any:
        """ftfy's ``fix_text`` with this formatter's settings (loaded once per worker)."""
        ftfy = load("ftfy", "FTFYFormatter", "unicode")
        config = ftfy.TextFixerConfig(**self.settings)
        return lambda text: ftfy.fix_text(text, config=config)

    def format(self, text: str) -> str:
        return self._fix(text)


class SymbolLinesFormatter(BaseFormatter):
    """Remove lines made only of symbols (and spaces): a run of them becomes ``replace_char`` (nothing by
    default); blank lines stay (datatrove's ``SymbolLinesFormatter``). Lines are ``str.splitlines``'s, joined
    with ``\\n``.

    Args:
        symbols_to_remove: the symbols (default datatrove's ``PUNCTUATION_SET``).
        replace_char: what a removed run becomes (``"\\n"``: a paragraph break).
    """

    name = "symbol_lines_formatter"

    def __init__(self, symbols_to_remove: list[str] | None = None, replace_char: str = "") -> None:
        self.replace_char = replace_char
        self.symbols_to_remove = frozenset(symbols_to_remove) if symbols_to_remove is not None else PUNCTUATION_SET

    def format(self, text: str) -> str:
        out: list[str] = []
        in_removed = False
        symbols = self.symbols_to_remove
        for line in text.splitlines():
            symbol_line = line.strip() != "" and all(c in symbols or c == " " for c in line)
            if symbol_line and not in_removed:
                if self.replace_char:
                    out.append(self.replace_char)
                in_removed = True
            elif not symbol_line:
                out.append(line)
                in_removed = False
        return "\n".join(out)


__all__ = ["BaseFormatter", "FTFYFormatter", "SymbolLinesFormatter"]

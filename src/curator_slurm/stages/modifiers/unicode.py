"""Unicode repair with ftfy, as NeMo Curator's ``UnicodeReformatter`` does it.

ftfy is imported when a ``UnicodeReformatter`` modifies its first document, not before: importing it
costs about 80 ms, which every process that imports the stages would otherwise pay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pyarrow as pa

from curator_slurm.stages.text.compute import match_substring

from ...extras import load, require
from .base import DocumentModifier


class UnicodeReformatter(DocumentModifier):
    """Repair broken Unicode (mojibake, HTML entities, terminal escapes, control characters) with
    ``ftfy.fix_text``, with NeMo Curator's defaults, which differ from ftfy's own: no ligature, width,
    quote or line-break changes and no normalisation, so only what is broken changes.

    The parameters are those of ``ftfy.TextFixerConfig`` (https://ftfy.readthedocs.io/en/latest/config.html);
    ``config`` (a ``TextFixerConfig``) overrides them all. ``explain`` never changes the text: ``False``
    is a little faster.
    """

    name = "unicode_reformatter"
    fingerprint_exclude = frozenset({"_fix"})  # the fixer built on first use from ``options``

    def __init__(
        self,
        config: Any = None,
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
        normalization: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = None,
        max_decode_length: int = 1_000_000,
        explain: bool = True,
    ) -> None:
        if config is not None:
            # A TextFixerConfig is a NamedTuple: keep its fields as plain values, so that building the
            # stage does not need ftfy and the fingerprint shows each option.
            self.options = dict(config._asdict())
        else:
            self.options = {
                "unescape_html": unescape_html,
                "remove_terminal_escapes": remove_terminal_escapes,
                "fix_encoding": fix_encoding,
                "restore_byte_a0": restore_byte_a0,
                "replace_lossy_sequences": replace_lossy_sequences,
                "decode_inconsistent_utf8": decode_inconsistent_utf8,
                "fix_c1_controls": fix_c1_controls,
                "fix_latin_ligatures": fix_latin_ligatures,
                "fix_character_width": fix_character_width,
                "uncurl_quotes": uncurl_quotes,
                "fix_line_breaks": fix_line_breaks,
                "fix_surrogates": fix_surrogates,
                "remove_control_chars": remove_control_chars,
                "normalization": normalization,
                "max_decode_length": max_decode_length,
                "explain": explain,
            }
        if self.options.get("normalization") not in (None, "NFC", "NFD", "NFKC", "NFKD"):
            raise ValueError(
                f"UnicodeReformatter(normalization={self.options.get('normalization')!r}): use 'NFC', 'NFD', "
                "'NFKC', 'NFKD' or None"
            )
        require("ftfy", "UnicodeReformatter")
        self._fix: Callable[[str], str] | None = None

    def _fixer(self) -> Callable[[str], str]:
        if self._fix is None:
            ftfy = load("ftfy", "UnicodeReformatter")
            config = ftfy.TextFixerConfig(**self.options)
            fix_text = ftfy.fix_text
            self._fix = lambda text: fix_text(text, config=config)
        return self._fix

    def modify_document(self, text: str) -> str:
        return self._fixer()(text)

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array:
        # ftfy runs at a few MB/s; the texts it provably leaves as they are skip it (see _needs_ftfy).
        fix = self._fixer()
        needs = match_substring(texts, self._needs_ftfy(), regex=True)
        return pa.array(
            [t if not n else fix(t) for t, n in zip(texts.to_pylist(), needs.to_pylist(), strict=True)],
            type=pa.string(),
        )

    def _needs_ftfy(self) -> str:
        """An RE2 class of the characters without which ftfy returns a text unchanged: anything not ASCII
        (mojibake, widths, ligatures, quotes, normalisation all need it), ``&`` (HTML entities), the
        ASCII controls (ftfy removes most; ESC starts terminal escapes) and, when it fixes line breaks,
        CR and FF. Printable ASCII, tab and LF never change: ASCII is never mojibake, and every Unicode
        normal form leaves it as it is. A test checks this for each ASCII character."""
        keep = r"\x09\x0a\x20-\x25\x27-\x7e" + ("" if self.options.get("fix_line_breaks") else r"\x0c\x0d")
        return f"[^{keep}]"

    def __getstate__(self) -> dict[str, Any]:
        # The cached fixer is a closure over ftfy: rebuild it in the worker instead of pickling it.
        return {**self.__dict__, "_fix": None}

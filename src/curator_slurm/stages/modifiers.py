"""Document modifiers and the :class:`Modify` stage that applies them: text in, changed text out.

The modifiers have NeMo Curator's names, parameters, defaults and results (``UnicodeReformatter``,
``NewlineNormalizer``, ``UrlRemover``, ``LineRemover``, ``MarkdownRemover``, ``QuotationRemover``,
``Slicer``, ``BoilerPlateStringModifier``), so a pipeline moved from NeMo Curator gives the same text.
Where a pyarrow kernel gives exactly the same result (the regex and line-based ones), a modifier changes
a whole column at once; the others run their per-document Python, as NeMo Curator does.

Nothing here imports ftfy until a ``UnicodeReformatter`` modifies its first document: importing ftfy
costs about 80 ms, which every process that imports this package would otherwise pay.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

import pyarrow as pa

from .._lazy import LazyModule
from ..errors import InputError
from ..tasks import DocumentBatch
from ._kernels import call, replace_regex, to_numpy
from .base import PASSTHROUGH, ProcessingStage

_compute = LazyModule("pyarrow._compute")
_np = LazyModule("numpy")

#: Whitespace as Python's ``re`` sees ``\s`` in a str pattern; RE2's ``\s`` alone is ASCII-only.
_PY_SPACE = r"\s\x0b\x1c-\x1f\x85\p{Z}"

#: Paragraph substrings that mark site boilerplate (policies, cookie banners); the list NeMo Curator
#: adapted from C4, matched against the lower-cased, stripped paragraph.
POLICY_SUBSTRINGS: tuple[str, ...] = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "privacy overview",
    "use of cookies",
    "use cookies",
    "privacy & cookies policy",
    "privacy and cookies policy",
    "this website uses cookies to improve your experience while you navigate through the website. out of these "
    "cookies, the cookies that are categorized as necessary are stored on your browser as they are essential for "
    "the working of basic functionalities of the website. we also use third-party cookies that help us analyze "
    "and understand how you use this website. these cookies will be stored in your browser only with your "
    "consent. you also have the option to opt-out of these cookies. but opting out of some of these cookies may "
    "have an effect on your browsing experience.",
    "necessary cookies are absolutely essential for the website to function properly. this category only "
    "includes cookies that ensures basic functionalities and security features of the website. these cookies do "
    "not store any personal information.",
    "any cookies that may not be particularly necessary for the website to function and is used specifically to "
    "collect user personal data via analytics, ads, other embedded contents are termed as non-necessary cookies. "
    "it is mandatory to procure user consent prior to running these cookies on your website.",
    "this site uses cookies, including for analytics, personalization, and advertising purposes. for more "
    "information or to change your cookie settings, click here.",
    "if you continue to browse this site without changing your cookie settings, you agree to this use. acceptread more",
)


@functools.cache
def _regex(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``pattern`` compiled on first use: compiling every modifier's patterns at import would cost
    every process that imports the stages a few milliseconds."""
    return re.compile(pattern, flags)


def _strings(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
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
    attribute: ``repr`` shows them, and a :class:`Modify` stage's run fingerprint is built from it.
    """

    name: str = "document_modifier"

    def modify_document(self, text: str) -> str:
        raise NotImplementedError(f"{type(self).__name__} must implement modify_document or modify_array")

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """The modified texts, one per input (nulls stay null); by default ``modify_document`` on each."""
        modify = self.modify_document
        return pa.array([None if t is None else modify(t) for t in texts.to_pylist()], type=pa.string())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()) if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


class FunctionModifier(DocumentModifier):
    """A plain ``str -> str`` function as a modifier (what :class:`Modify` makes of a callable).

    Its ``repr`` (and so the run fingerprint) names the function by module and qualified name, not by
    its address, which differs from process to process: every shard of an array must agree on it.
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


class UnicodeReformatter(DocumentModifier):
    """Repair broken Unicode (mojibake, HTML entities, terminal escapes, control characters) with
    ``ftfy.fix_text``, with NeMo Curator's defaults, which differ from ftfy's own: no ligature, width,
    quote or line-break changes and no normalisation, so only what is broken changes.

    The parameters are those of ``ftfy.TextFixerConfig`` (https://ftfy.readthedocs.io/en/latest/config.html);
    ``config`` (a ``TextFixerConfig``) overrides them all. ``explain`` never changes the text: ``False``
    is a little faster.
    """

    name = "unicode_reformatter"

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
        self._fix: Callable[[str], str] | None = None

    def _fixer(self) -> Callable[[str], str]:
        if self._fix is None:
            try:
                import ftfy
            except ImportError as e:  # pragma: no cover - ftfy is a dependency
                raise ImportError("UnicodeReformatter needs ftfy: pip install ftfy") from e
            config = ftfy.TextFixerConfig(**self.options)
            fix_text = ftfy.fix_text
            self._fix = lambda text: fix_text(text, config=config)
        return self._fix

    def modify_document(self, text: str) -> str:
        return self._fixer()(text)

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array:
        # ftfy runs at a few MB/s; the texts it provably leaves as they are skip it (see _needs_ftfy).
        fix = self._fixer()
        needs = call("match_substring_regex", texts, options=_compute.MatchSubstringOptions(self._needs_ftfy()))
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


class NewlineNormalizer(DocumentModifier):
    """Replace 3 or more consecutive newlines by 2 (a paragraph break), and 3 or more ``\\r\\n`` by 2."""

    name = "newline_normalizer"

    def modify_document(self, text: str) -> str:
        return _regex(r"(?:\r\n){3,}").sub("\r\n\r\n", _regex(r"\n{3,}").sub("\n\n", text))

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        return replace_regex(replace_regex(texts, r"\n{3,}", "\n\n"), r"(?:\r\n){3,}", "\r\n\r\n")


#: NeMo Curator's URL pattern (``https?://\S+|www\.\S+``, case-insensitive), with Python's ``\S``.
_URL = rf"(?i)https?://[^{_PY_SPACE}]+|www\.[^{_PY_SPACE}]+"


class UrlRemover(DocumentModifier):
    """Remove every URL: ``http://`` or ``https://`` or ``www.`` (any case) up to the next whitespace.
    The whitespace around a URL stays."""

    name = "url_remover"

    def modify_document(self, text: str) -> str:
        return _regex(r"https?://\S+|www\.\S+", re.IGNORECASE).sub("", text)

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        return replace_regex(texts, _URL, "")


class LineRemover(DocumentModifier):
    """Remove the lines (split on ``\\n``) that are exactly one of ``patterns``; no stripping, so a line
    with a trailing space or ``\\r`` does not match."""

    name = "line_remover"

    def __init__(self, patterns: Sequence[str]) -> None:
        if isinstance(patterns, str):
            raise TypeError(f"LineRemover(patterns={patterns!r}): give a list of whole lines, not one string")
        self.patterns = list(patterns)
        self._set = frozenset(self.patterns)

    def modify_document(self, text: str) -> str:
        remove = self._set
        return "\n".join(line for line in text.split("\n") if line not in remove)

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array:
        texts = _strings(texts)
        if not self.patterns or len(texts) == 0:
            return texts
        lines = call("split_pattern", texts, options=_compute.SplitPatternOptions("\n"))
        values = lines.flatten()
        keep = call("invert", call("is_in", values, options=_compute.SetLookupOptions(pa.array(self.patterns))))
        parents = to_numpy(call("list_parent_indices", lines))
        kept = to_numpy(keep)
        counts = _np.bincount(parents[kept], minlength=len(texts))
        offsets = _np.zeros(len(texts) + 1, dtype=_np.int32)
        _np.cumsum(counts, out=offsets[1:])
        joined = call("binary_join", pa.ListArray.from_arrays(pa.array(offsets), call("filter", values, keep)), "\n")
        if texts.null_count:
            joined = call("if_else", call("is_valid", texts), joined, pa.scalar(None, pa.string()))
        return joined


#: NeMo Curator's Markdown patterns, applied in this order: bold, italic, underline, link (kept: the URL).
_MARKDOWN = (
    (r"\*\*(.*?)\*\*", r"\1"),
    (r"\*(.*?)\*", r"\1"),
    (r"_(.*?)_", r"\1"),
    (r"\[.*?\]\((.*?)\)", r"\1"),
)


class MarkdownRemover(DocumentModifier):
    """Remove Markdown emphasis within each line: ``**bold**``, ``*italic*`` and ``_underline_`` keep
    their text; a link ``[text](url)`` becomes its URL (NeMo Curator's meaning). Nothing spans lines."""

    name = "markdown_remover"

    def modify_document(self, text: str) -> str:
        lines = []
        for line in text.split("\n"):
            for pattern, replacement in _MARKDOWN:
                line = _regex(pattern).sub(replacement, line)
            lines.append(line)
        return "\n".join(lines)

    def modify_array(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        # No pattern can match a newline ("." does not), so each applied to the whole text changes each
        # line as the per-line loop does.
        for pattern, replacement in _MARKDOWN:
            texts = replace_regex(texts, pattern, replacement)
        return texts


class QuotationRemover(DocumentModifier):
    """Remove the quotation marks around a whole document: when it is longer than 2 characters
    (stripped), starts and ends with ``"``, and either has one line or its first line does not itself
    end with ``"`` (which would make the marks belong to separate quotes)."""

    name = "quotation_remover"

    def modify_document(self, text: str) -> str:
        quoted = len(text.strip()) > 2 and text[0] == '"' and text[-1] == '"'
        if quoted and ("\n" not in text.strip() or text.split("\n")[0][-1] != '"'):
            return text[1:-1]
        return text


class Slicer(DocumentModifier):
    """Keep a slice of each document.

    ``left``: an index to start at, or a substring to start at the first occurrence of (the document
    becomes empty if it is absent); ``right``: an index to end before, or a substring to end at the last
    occurrence of (empty if absent), None for the end. ``include_left``/``include_right`` keep the
    substrings themselves; ``strip`` strips whitespace from the result.
    """

    name = "slicer"

    def __init__(
        self,
        left: int | str | None = 0,
        right: int | str | None = None,
        include_left: bool = True,
        include_right: bool = True,
        strip: bool = True,
    ) -> None:
        self.left = left
        self.right = right
        self.include_left = include_left
        self.include_right = include_right
        self.strip = strip

    def modify_document(self, text: str) -> str:
        start = 0
        if isinstance(self.left, int):
            start = self.left
        elif isinstance(self.left, str):
            found = text.find(self.left)
            if found == -1:
                return ""
            start = found if self.include_left else found + len(self.left)
        end = len(text)
        if isinstance(self.right, int):
            end = self.right
        elif isinstance(self.right, str):
            found = text.rfind(self.right)
            if found == -1:
                return ""
            end = found + len(self.right) if self.include_right else found
        result = text[start:end]
        return result.strip() if self.strip else result


def boilerplate_at_edges_only(indices: list[int], num_paragraphs: int) -> bool:
    """Whether the paragraphs at ``indices`` (ascending) form one run touching the top or the bottom of
    the document, without being all of it: only then can they be cut without cutting the text apart."""
    if not indices or len(indices) == num_paragraphs:
        return False
    contiguous = all(b == a + 1 for a, b in itertools.pairwise(indices))
    return contiguous and (indices[0] == 0 or indices[-1] == num_paragraphs - 1)


class BoilerPlateStringModifier(DocumentModifier):
    """Remove site boilerplate by paragraph (paragraphs are split on ``\\n\\n``), after C4 as NeMo
    Curator adapts it.

    A paragraph containing "lorem ipsum" empties the document. A paragraph containing a policy phrase
    (:data:`POLICY_SUBSTRINGS`: "terms of use", "privacy policy", "uses cookies", ...; case-insensitive)
    empties it too if ``remove_if_at_top_or_bottom`` is False; if True, such paragraphs are removed when
    they form one run at the top or the bottom of the document, and the document is kept unchanged when
    they are elsewhere (or are all of it).
    """

    name = "boilerplate_string"

    def __init__(self, remove_if_at_top_or_bottom: bool = True) -> None:
        self.remove_if_at_top_or_bottom = remove_if_at_top_or_bottom

    def modify_document(self, text: str) -> str:
        paragraphs = text.split("\n\n")
        found: list[int] = []
        for i, paragraph in enumerate(paragraphs):
            lowered = paragraph.strip().lower()
            if "lorem ipsum" in lowered:
                return ""
            if any(p in lowered for p in POLICY_SUBSTRINGS):
                if not self.remove_if_at_top_or_bottom:
                    return ""
                found.append(i)
        if not boilerplate_at_edges_only(found, len(paragraphs)):
            return text
        drop = set(found)
        return "\n\n".join(p for i, p in enumerate(paragraphs) if i not in drop)


ModifierLike = DocumentModifier | Callable[[str], str]


def _as_modifier(m: ModifierLike) -> DocumentModifier:
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
    """Apply document modifiers to fields, in order (NeMo Curator's ``Modify``).

    ``modifier_fn``: a :class:`DocumentModifier`, a function, or a list of them. ``input_fields``: one
    field for all, one per modifier, or one list of fields per modifier; a modifier with several
    fields gets them as keyword arguments (``modify_document(title=..., text=...)``) and needs an
    output field. ``output_fields``: None to change the (single) input field in place, else one field
    for all or one per modifier (None in the list: in place). A later modifier sees what the earlier
    ones wrote. Rows are never dropped or reordered, so document positions (and
    :class:`~.ids.AddId`) still work after a Modify.
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
                raise ValueError(
                    f"Modify: {modifier.name} reads {fields}, so it cannot write in place; give output_fields="
                )
            self.output_fields.append(output or fields[0])
        self.name = f"modify[{'+'.join(m.name for m in self.modifiers)}]"

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
                where = ", ".join(task.metadata.get("files", [])) or task.task_id
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

"""Document modifiers: each one's output pinned on hand-derived examples from NeMo Curator's definition
(stages/text/modifiers), the column API equal to the per-document one, and the Modify stage in a real
pipeline over real files."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from curator_slurm import DocumentBatch, InputError, LocalExecutor, Pipeline, PipelineBuildError
from curator_slurm.stages import (
    BoilerPlateStringModifier,
    DocumentModifier,
    JsonlReader,
    JsonlWriter,
    LineRemover,
    MarkdownRemover,
    Modify,
    NewlineNormalizer,
    QuotationRemover,
    Slicer,
    UnicodeReformatter,
    UrlRemover,
)
from curator_slurm.stages.modifiers.boilerplate import boilerplate_at_edges_only

#: "doesn\u2019t" encoded as UTF-8 and decoded as Windows-1252, twice: ftfy's own mojibake example.
MOJIBAKE = "doesn\u2019t".encode().decode("windows-1252").encode().decode("windows-1252")


def both(modifier: DocumentModifier, text: str) -> str:
    """The modified text, checked to be the same through the per-document and the column API."""
    one = modifier.modify_document(text)
    column = modifier.modify_array(pa.chunked_array([[text]], pa.string())).to_pylist()
    assert column == [one], f"{type(modifier).__name__}: column API gave {column!r}, per-document {one!r}"
    return one


# --- UnicodeReformatter: ftfy.fix_text with NeMo's TextFixerConfig defaults ------------------------


def test_unicode_reformatter_repairs_mojibake_but_keeps_curly_quotes_as_nemo_configures_ftfy() -> None:
    # ftfy's own example: UTF-8 read as Windows-1252 twice. NeMo sets uncurl_quotes=False, so the
    # apostrophe comes back curly (ftfy's default config would straighten it to ').
    u = UnicodeReformatter()
    assert both(u, f"The Mona Lisa {MOJIBAKE} have eyebrows.") == "The Mona Lisa doesn\u2019t have eyebrows."
    assert both(u, "\u201cquoted\u201d") == "\u201cquoted\u201d"


def test_unicode_reformatter_leaves_what_nemo_turns_off() -> None:
    # fix_latin_ligatures, fix_character_width, fix_line_breaks False and normalization None.
    u = UnicodeReformatter()
    for text in ["\ufb01ne", "\uff2c\uff2f\uff35\uff24", "cafe\u0301", "a\r\nb", "line\u2028sep"]:
        assert both(u, text) == text


def test_unicode_reformatter_fixes_what_nemo_turns_on() -> None:
    u = UnicodeReformatter()
    # unescape_html="auto": entities are decoded unless the segment holds a literal "<" (real HTML).
    assert both(u, "&lt;3 &amp; more") == "<3 & more"
    assert both(u, "<b>&lt;3</b>") == "<b>&lt;3</b>"
    # remove_terminal_escapes, remove_control_chars (a bell and a byte-order mark).
    assert both(u, "\x1b[36;44mcolor\x1b[m") == "color"
    assert both(u, "a\x07b\ufeffc") == "abc"


def test_unicode_reformatter_options_and_config() -> None:
    import ftfy

    text = "\u201ccafe\u0301\u201d"
    assert both(UnicodeReformatter(uncurl_quotes=True, normalization="NFC"), text) == '"caf\u00e9"'
    # A whole TextFixerConfig overrides the keyword options: ftfy's defaults straighten and compose.
    assert both(UnicodeReformatter(config=ftfy.TextFixerConfig()), text) == '"caf\u00e9"'
    with pytest.raises(ValueError, match="normalization='NFX'"):
        UnicodeReformatter(normalization="NFX")  # type: ignore[arg-type]


@pytest.mark.parametrize("options", [{}, {"fix_line_breaks": True}, {"ftfy_defaults": True}], ids=str)
def test_unicode_reformatter_column_fast_path_changes_nothing_ftfy_would_change(options: dict) -> None:
    # The column API skips ftfy for texts it provably leaves unchanged (printable ASCII, tab, LF, and
    # CR/FF unless line breaks are fixed): each ASCII character, and random mixes with the sequences
    # ftfy acts on, must come out as ftfy.fix_text gives them.
    import random

    import ftfy

    u = UnicodeReformatter(config=ftfy.TextFixerConfig()) if options.pop("ftfy_defaults", False) else None
    u = u or UnicodeReformatter(**options)
    texts = [f"ab{chr(c)}cd x{chr(c)}\n{chr(c)}" for c in range(128)]
    pieces = [
        "a",
        " ",
        "&amp;",
        "&",
        "\r\n",
        "\r",
        "\x0c",
        "\x0b",
        "\x1b[31m",
        "\x7f",
        "\t",
        "?",
        "\u00e9",
        "\u00c3\u00a9",
    ]
    rng = random.Random(7)
    texts += ["".join(rng.choices(pieces, k=rng.randint(0, 12))) for _ in range(2000)]
    assert u.modify_array(pa.chunked_array([texts])).to_pylist() == [u.modify_document(t) for t in texts]


def test_unicode_reformatter_pickles_after_use() -> None:
    # Spawned workers receive stages by pickle, possibly after the driver used them.
    u = UnicodeReformatter()
    assert u.modify_document("&amp;") == "&"
    assert pickle.loads(pickle.dumps(u)).modify_document("&amp;") == "&"


# --- the string modifiers -------------------------------------------------------------------------


def test_newline_normalizer() -> None:
    # NeMo: (\n){3,} -> "\n\n", then (\r\n){3,} -> "\r\n\r\n".
    n = NewlineNormalizer()
    assert both(n, "a\n\n\n\nb") == "a\n\nb"
    assert both(n, "a\n\nb\nc") == "a\n\nb\nc"
    assert both(n, "a\r\n\r\n\r\nb") == "a\r\n\r\nb"
    assert both(n, "a\n\n\n") == "a\n\n"
    # "\r\n" runs hold no "\n\n", and a run broken by spaces is not one run.
    assert both(n, "a\n \n \nb") == "a\n \n \nb"


def test_url_remover() -> None:
    # NeMo: https?://\S+|www\.\S+, case-insensitive, replaced by nothing; the spaces around stay.
    u = UrlRemover()
    assert both(u, "see https://example.com/a?b=1 now") == "see  now"
    assert both(u, "HTTP://X.ORG, and www.example.com.") == " and "
    assert both(u, "ftp://host/file and example.com stay") == "ftp://host/file and example.com stay"
    # \S stops at any Unicode whitespace, as in Python's re (RE2's \S alone is ASCII-only).
    assert both(u, "go http://a.b\u00a0next\u3000www.c.d\u2028end") == "go \u00a0next\u3000\u2028end"


def test_url_remover_whitespace_matches_python_for_every_code_point() -> None:
    # The column API spells Python's \s out for RE2; any gap would let a URL eat one character too many.
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = [f"http://x{c}y" for c in chars]
    got = UrlRemover().modify_array(pa.chunked_array([texts])).to_pylist()
    expected = [re.sub(r"https?://\S+", "", t) for t in texts]
    wrong = [hex(ord(c)) for c, g, e in zip(chars, got, expected, strict=True) if g != e]
    assert wrong == []


def test_line_remover() -> None:
    # NeMo: split on "\n", drop lines equal to a pattern, join with "\n".
    r = LineRemover(patterns=["Read more", "Share this"])
    assert both(r, "Title\nRead more\nBody\nShare this") == "Title\nBody"
    assert both(r, "Read more") == ""
    assert both(r, "Read more\nRead more\nx") == "x"
    # Whole lines only: no substring match, no stripping, "\r" stays part of the line.
    assert both(r, "Read more here\n Read more\nRead more\r") == "Read more here\n Read more\nRead more\r"
    assert both(r, "a\n\nb") == "a\n\nb"
    assert both(LineRemover(patterns=[""]), "a\n\nb\n") == "a\nb"
    with pytest.raises(TypeError, match="list of whole lines"):
        LineRemover(patterns="Read more")  # type: ignore[arg-type]


def test_markdown_remover() -> None:
    # NeMo, per line and in this order: **bold**, *italic*, _underline_ keep their text; [text](url)
    # becomes the url.
    m = MarkdownRemover()
    assert both(m, "**bold** and *italic* and _under_") == "bold and italic and under"
    assert both(m, "see [the docs](https://x.org/d) now") == "see https://x.org/d now"
    assert both(m, "snake_case_name") == "snakecasename"  # NeMo's underline rule does this too
    # Markers do not pair across lines.
    assert both(m, "*open\nclose*") == "*open\nclose*"
    assert both(m, "2 * 3 * 4") == "2  3  4"


def test_quotation_remover() -> None:
    q = QuotationRemover()
    assert both(q, '"A quoted document."') == "A quoted document."
    assert both(q, '"line one\nline two"') == "line one\nline two"
    # The first line ends with its own quote: two quotations, left alone.
    assert both(q, '"one"\n"two"') == '"one"\n"two"'
    # Too short once stripped, or not quoted at both ends of the raw text.
    assert both(q, '""') == '""'
    assert both(q, '"a"') == "a"  # three characters: longer than 2
    assert both(q, ' "padded" ') == ' "padded" '
    assert both(q, '"open only') == '"open only'


def test_slicer() -> None:
    text = "Header | BODY text | footer"
    assert both(Slicer(), "  x  ") == "x"  # left=0, right=None, strip=True
    assert both(Slicer(left=3, right=8, strip=False), "0123456789") == "34567"
    assert both(Slicer(left="|", right="|"), text) == "| BODY text |"
    assert both(Slicer(left="|", right="|", include_left=False, include_right=False), text) == "BODY text"
    assert both(Slicer(left="|", right="|", include_left=False, include_right=False, strip=False), text) == (
        " BODY text "
    )
    # A missing marker empties the document.
    assert both(Slicer(left="<main>"), text) == ""
    assert both(Slicer(right="<end>"), text) == ""
    # right is the last occurrence.
    assert both(Slicer(left="a", right="a"), "xaxaxax") == "axaxa"


def test_boilerplate_string_modifier() -> None:
    b = BoilerPlateStringModifier()
    body = "A real paragraph about birds.\n\nAnother one about trees."
    # A policy paragraph at the top or bottom is cut.
    assert both(b, "Read our Privacy Policy.\n\n" + body) == body
    assert both(b, body + "\n\nThis site Uses Cookies.\n\nTerms of use apply.") == body
    # In the middle (or both ends apart), the document is kept unchanged.
    middle = "Birds.\n\nSee the terms of use.\n\nTrees."
    assert both(b, middle) == middle
    edges = "Cookie policy.\n\nBirds.\n\nPrivacy policy."
    assert both(b, edges) == edges
    # All paragraphs boilerplate: kept unchanged (NeMo's rule).
    assert both(b, "Privacy policy.") == "Privacy policy."
    # "lorem ipsum" anywhere empties the document.
    assert both(b, body + "\n\nLorem ipsum dolor sit amet.") == ""
    # remove_if_at_top_or_bottom=False: any policy paragraph empties it.
    strict = BoilerPlateStringModifier(remove_if_at_top_or_bottom=False)
    assert both(strict, "Read our Privacy Policy.\n\n" + body) == ""
    assert both(strict, body) == body


def test_boilerplate_at_edges_only() -> None:
    # NeMo's examples for 11 paragraphs.
    assert boilerplate_at_edges_only([0, 1], 11)
    assert boilerplate_at_edges_only([9, 10], 11)
    assert not boilerplate_at_edges_only([0, 1, 9, 10], 11)  # two runs: not contiguous
    assert not boilerplate_at_edges_only([0, 1, 3], 11)
    assert not boilerplate_at_edges_only(list(range(11)), 11)
    assert not boilerplate_at_edges_only([4, 5], 11)


# --- column API == per-document API on edge cases --------------------------------------------------

EDGE = [
    "",
    " ",
    "\n",
    "\n\n\n",
    "\r\n\r\n\r\n\r\n",
    "plain text",
    '"quoted"',
    "**b** *i* _u_ [t](u)\n**x",
    "https://a.b/c\u00a0www.d.e",
    "Read more\nRead more",
    "x\n\n\n\ny\r\n\r\n\r\nz",
    "日本語 https://例え.jp/パス テキスト",
    "emoji 🙂 www.x.y 🙂",
    "Privacy policy\n\nbody\n\n\n\nfooter",
]
MODIFIERS = [
    UnicodeReformatter(),
    NewlineNormalizer(),
    UrlRemover(),
    LineRemover(["Read more", "", "**x"]),
    MarkdownRemover(),
    QuotationRemover(),
    Slicer(left="b", right="e"),
    BoilerPlateStringModifier(),
]


@pytest.mark.parametrize("modifier", MODIFIERS, ids=lambda m: type(m).__name__)
def test_column_api_equals_per_document_api(modifier: DocumentModifier) -> None:
    column = pa.chunked_array([EDGE[:5], [*EDGE[5:], None]], pa.string())
    expected = [modifier.modify_document(t) for t in EDGE] + [None]
    assert modifier.modify_array(column).to_pylist() == expected


# --- the Modify stage ------------------------------------------------------------------------------


def _batch(rows: list[dict]) -> DocumentBatch:
    return DocumentBatch(task_id="t", data=pa.Table.from_pylist(rows), metadata={"files": ["in.jsonl"]})


def test_modify_chains_modifiers_in_place_and_into_new_fields() -> None:
    batch = _batch([{"text": "see http://x.y\n\n\n\n**now**", "n": 1}, {"text": None, "n": 2}])
    out = Modify([UrlRemover(), NewlineNormalizer(), MarkdownRemover()]).process(batch)
    assert out.data.column("text").to_pylist() == ["see \n\nnow", None]
    assert out.data.column("n").to_pylist() == [1, 2]
    # One output field per modifier; a later modifier reads what the earlier one wrote only if told to.
    stage = Modify([UrlRemover(), str.upper], input_fields=["text", "clean"], output_fields=["clean", None])
    out = stage.process(_batch([{"text": "go http://x.y"}]))
    assert out.data.to_pylist() == [{"text": "go http://x.y", "clean": "GO "}]
    assert stage.inputs() == (["data"], ["text"])
    assert stage.outputs() == (["data"], ["*", "clean"])


class _Headline(DocumentModifier):
    """A multi-input modifier, NeMo Curator's way: each input field is a keyword argument."""

    name = "headline"

    def modify_document(self, title: str, text: str) -> str:  # type: ignore[override]
        return f"{title.upper()}: {text}"


def test_modify_with_several_input_fields_passes_them_by_name() -> None:
    def signed(full: str, author: str | None) -> str:
        return f"{full} ({author or 'anonymous'})"

    batch = _batch([{"title": "News", "text": "body", "author": "Ann"}, {"title": "x", "text": "y", "author": None}])
    stage = Modify(
        [_Headline(), signed, str.strip],
        input_fields=[["title", "text"], ["full", "author"], ["full"]],
        output_fields=["full", "full", None],
    )
    out = stage.process(batch).data
    assert out.column("full").to_pylist() == ["NEWS: body (Ann)", "X: y (anonymous)"]
    assert out.column("text").to_pylist() == ["body", "y"]
    # "full" is written by the first modifier, so only the others are needed from before the stage.
    assert stage.inputs() == (["data"], ["title", "text", "author"])
    with pytest.raises(ValueError, match="output_fields must be provided when any modifier has multiple input"):
        Modify(_Headline(), input_fields=[["title", "text"]])
    with pytest.raises(TypeError, match=r"input_fields must be str, list\[str\], or list\[list\[str\]\]"):
        Modify([_Headline(), str.strip], input_fields=[["title", "text"], "text"])


def test_modify_takes_functions_and_names_them_stably() -> None:
    stage = Modify(str.strip)
    assert stage.process(_batch([{"text": "  x "}])).data.column("text").to_pylist() == ["x"]
    # The fingerprint names the function, never its address (which differs in every process).
    assert "str.strip" in repr(stage.params())
    assert "0x" not in repr(stage.params())
    assert stage.name == "modify[strip]"
    # A function may compute something other than text into another field.
    out = Modify(len, output_fields="length").process(_batch([{"text": "abc"}, {"text": None}]))
    assert out.data.column("length").to_pylist() == [3, None]
    assert out.data.column("length").type == pa.int64()


def test_modify_fingerprint_sees_modifier_parameters() -> None:
    one, two = Modify(Slicer(left=1)), Modify(Slicer(left=2))
    assert one.params() != two.params()
    assert Modify(UnicodeReformatter()).params() != Modify(UnicodeReformatter(uncurl_quotes=True)).params()
    assert Modify(LineRemover(["a"])).params() == Modify(LineRemover(["a"])).params()


def test_modify_errors_name_the_problem() -> None:
    with pytest.raises(InputError, match=r"in.jsonl: no field 'body'.*Set input_fields="):
        Modify(UrlRemover(), input_fields="body").process(_batch([{"text": "x"}]))
    with pytest.raises(TypeError, match="write UrlRemover\\(\\)"):
        Modify(UrlRemover)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Number of input fields \(3\) must be 1 or equal to number of modifiers"):
        Modify([UrlRemover(), Slicer()], input_fields=["a", "b", "c"])
    with pytest.raises(ValueError, match="modifier_fn list cannot be empty"):
        Modify([])


def test_modify_in_a_pipeline_over_real_files(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    docs = [
        {"text": f"Intro {MOJIBAKE}\n\n\n\nsee https://x.org", "k": 1},
        {"text": "Privacy policy\n\nBody stays.", "k": 2},
        {"k": 3},
    ]
    (src / "a.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    pipeline = (
        Pipeline("modify")
        .add_stage(JsonlReader(str(src)))
        .add_stage(Modify([UnicodeReformatter(), NewlineNormalizer(), UrlRemover(), BoilerPlateStringModifier()]))
        .add_stage(JsonlWriter(str(tmp_path / "out")))
    )
    result = pipeline.run(LocalExecutor(workers=1))
    rows = [json.loads(line) for f in result.output_files for line in Path(f).read_text().splitlines()]
    assert [r.get("text") for r in rows] == ["Intro doesn\u2019t\n\nsee ", "Body stays.", None]
    # Build-time checks see Modify's fields.
    bad = Pipeline("bad").add_stage(JsonlReader(str(src), fields=["k"])).add_stage(Modify(UrlRemover()))
    bad.add_stage(JsonlWriter(str(tmp_path / "bad")))
    with pytest.raises(PipelineBuildError, match="text"):
        bad.build()


def test_importing_the_stages_does_not_import_ftfy() -> None:
    code = "import sys, curator_slurm.stages; print('ftfy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

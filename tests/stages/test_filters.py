"""Document filters: vectorised scores agree with per-document scores, ScoreFilter keeps exactly what
passes, and custom filters work in a real pipeline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from curator_slurm import DocumentBatch, InputError, LocalExecutor, Pipeline, PipelineFailedError, ShardSpec
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.stages import (
    DocumentFilter,
    JsonlReader,
    JsonlWriter,
    MeanWordLengthFilter,
    RepeatedLinesFilter,
    ScoreFilter,
    SymbolRatioFilter,
    WordCountFilter,
)

#: Texts without leading/trailing whitespace or non-ASCII whitespace: every filter must agree on them.
PLAIN = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "日本語のテキスト です",
    "émigré café naïve",
    "e\u0301 combining accent",
    "emoji 🙂🙂 ok!!",
    "<div class='x'>markup</div> && {json: 1}",
    "١٢٣ ٤٥ arabic digits",
    "½ ² Ⅻ numbers",
    "line a\nline b\nline a\nline a",
    "a\r\nb\r\nb",
    "x",
    "$$$ ### !!! ???",
    "word\tword\tword",
    "zero\u200bwidth",
    "multiple    spaces   between\n\n\nwords",
]
#: Empty, whitespace-only and whitespace-padded texts, and nulls (scored as empty text).
EDGE = ["", " ", "   ", "\n\n", "\t", " leading", "trailing ", "trailing newline\n", "  both  ", None]
#: Whitespace beyond ASCII space/tab/newline, which str.split() and str.isspace() treat as whitespace.
UNICODE_SPACE = [
    "a\u00a0b",
    "x\u3000y z",
    "a\vb",
    "a\x1cb",
    "para\u2028graph",
    "a\u2029b",
    "thin\u2009space",
    "narrow\u202fnbsp",
    "next\x85line",
]

FILTERS: dict[str, DocumentFilter] = {
    "word_count": WordCountFilter(min_words=3, max_words=8),
    "mean_word_length": MeanWordLengthFilter(min_mean_word_length=3.0, max_mean_word_length=6.0),
    "symbol_ratio": SymbolRatioFilter(max_symbol_ratio=0.2),
    "repeated_lines": RepeatedLinesFilter(max_repeated_line_fraction=0.7),
}


def _cases() -> list[Any]:
    groups = {"plain": PLAIN, "edge": EDGE, "unicode_space": UNICODE_SPACE}
    return [pytest.param(f, texts, id=f"{f}-{g}") for f in FILTERS for g, texts in groups.items()]


def column(texts: list[str | None]) -> pa.ChunkedArray:
    """A text column in two chunks, as a table read from several files would have."""
    half = len(texts) // 2
    return pa.chunked_array([pa.array(texts[:half], pa.string()), pa.array(texts[half:], pa.string())])


def batch(texts: list[str | None], **extra: list[Any]) -> DocumentBatch:
    table = pa.table({"id": list(range(len(texts))), "text": pa.array(texts, pa.string()), **extra})
    return DocumentBatch(task_id="batch-0", data=table, metadata={"files": ["/data/in.jsonl"]})


def expected_ids(f: DocumentFilter, texts: list[str | None]) -> list[int]:
    return [i for i, t in enumerate(texts) if f.keep_document(f.score_document(t or ""))]


def run(pipeline: Pipeline) -> None:
    pipeline.run(LocalExecutor(workers=1, retry_backoff=0), shard=ShardSpec.single())


def read_rows(directory: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for p in sorted(directory.glob("*.jsonl")):
        rows.extend(json.loads(line) for line in p.read_text(encoding="utf-8").split("\n") if line)
    return rows


@pytest.mark.parametrize(("name", "texts"), _cases())
def test_score_array_agrees_with_score_document(name: str, texts: list[str | None]) -> None:
    """The vectorised score of every text equals score_document on it (nulls scored as empty text), and
    keep_array agrees with keep_document."""
    f = FILTERS[name]
    scores = f.score_array(column(texts))
    assert len(scores) == len(texts)
    expected = [f.score_document(t or "") for t in texts]
    assert [float(s) for s in scores.to_pylist()] == pytest.approx(expected)
    assert f.keep_array(scores).to_pylist() == [f.keep_document(s) for s in expected]


@pytest.mark.parametrize(
    ("f", "text", "score"),
    [
        (WordCountFilter(), "one two  three\nfour", 4),
        (MeanWordLengthFilter(), "ab abcd", 3.0),
        (SymbolRatioFilter(), "ab!!", 0.5),
        (SymbolRatioFilter(), "日本!", 1 / 3),
        (RepeatedLinesFilter(), "a\nb\na\na", 0.5),  # NeMo's meaning: 2 distinct of 4 non-blank lines
        (RepeatedLinesFilter(), "a\n\n  \nb", 1.0),
    ],
)
def test_score_document_known_values(f: DocumentFilter, text: str, score: float) -> None:
    """Each filter's score means what its docstring says, on hand-checked examples, in both code paths."""
    assert f.score_document(text) == pytest.approx(score)
    assert f.score_array(column([text, text])).to_pylist() == pytest.approx([score, score])


@pytest.mark.parametrize("name", FILTERS)
def test_score_filter_keeps_exactly_the_passing_documents(name: str) -> None:
    """ScoreFilter keeps exactly the rows whose score passes, in their original order, with all columns."""
    f = FILTERS[name]
    texts = PLAIN * 2
    out = ScoreFilter(f).process(batch(texts))
    ids = out.data.column("id").to_pylist()
    assert ids == expected_ids(f, texts)
    assert 0 < len(ids) < len(texts)
    assert out.data.column_names == ["id", "text"]
    assert out.data.column("text").to_pylist() == [texts[i] for i in ids]


class ImportRecorder:
    """A sys.meta_path finder that finds nothing and records each module name the import system
    searches for, i.e. each import that sys.modules could not answer."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        self.names.append(name)


@pytest.mark.parametrize("name", FILTERS)
def test_scoring_a_batch_searches_for_no_module(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a filter has run, scoring another batch does not go looking for modules. pyarrow's type
    inference for a Python scalar tries to import dateutil, and a module that is not installed is
    searched for along all of sys.path each time: that was 2-3 % of the demo job's CPU."""
    f = ScoreFilter(FILTERS[name], score_field="s")
    first, second = batch(PLAIN), batch(PLAIN)  # building a batch from Python values infers types
    f.process(first)
    recorder = ImportRecorder()
    monkeypatch.setattr(sys, "meta_path", [recorder, *sys.meta_path])
    out = f.process(second)
    assert recorder.names == []
    assert 0 < out.data.num_rows < len(PLAIN)


def test_min_words_one_drops_empty_and_blank_documents() -> None:
    """WordCountFilter(min_words=1), the usual way to drop empty documents, drops empty, blank and null
    texts and keeps one-word ones, whitespace around them or not."""
    texts = ["", "   ", "\n", None, "word", " word ", "word\n"]
    out = ScoreFilter(WordCountFilter(min_words=1, max_words=1)).process(batch(texts))
    assert out.data.column("id").to_pylist() == [4, 5, 6]


@pytest.mark.parametrize("name", FILTERS)
def test_score_field_adds_the_score_of_each_kept_row(name: str) -> None:
    """score_field appends a column holding each kept document's score."""
    f = FILTERS[name]
    out = ScoreFilter(f, score_field="score").process(batch(PLAIN)).data
    assert out.column_names == ["id", "text", "score"]
    assert [float(s) for s in out.column("score").to_pylist()] == pytest.approx(
        [f.score_document(t) for t in out.column("text").to_pylist()]
    )


def test_score_field_replaces_an_existing_column_of_that_name() -> None:
    """A score_field that already exists is overwritten in place, not duplicated."""
    out = ScoreFilter(WordCountFilter(min_words=0), score_field="score").process(
        batch(["a b", "c d e"], score=["old", "old"])
    )
    assert out.data.column_names == ["id", "text", "score"]
    assert out.data.column("score").to_pylist() == [2, 3]


@pytest.mark.parametrize("name", FILTERS)
def test_invert_keeps_the_complement(name: str) -> None:
    """invert=True keeps exactly the documents the plain filter drops: together they are every row, once."""
    f = FILTERS[name]
    texts = PLAIN
    kept = ScoreFilter(f).process(batch(texts)).data.column("id").to_pylist()
    dropped = ScoreFilter(f, invert=True, score_field="s").process(batch(texts)).data.column("id").to_pylist()
    assert set(kept).isdisjoint(dropped)
    assert sorted(kept + dropped) == list(range(len(texts)))
    assert dropped == [i for i in range(len(texts)) if i not in expected_ids(f, texts)]


def test_score_filter_on_an_empty_batch_returns_an_empty_batch() -> None:
    """A batch with no rows (e.g. after an earlier filter) passes through empty, with the score column."""
    empty = DocumentBatch(task_id="b", data=pa.table({"text": pa.array([], pa.string())}))
    out = ScoreFilter(WordCountFilter(), score_field="n").process(empty)
    assert out.data.num_rows == 0
    assert out.data.column_names == ["text", "n"]


@pytest.mark.parametrize("f", [WordCountFilter(min_words=0), MeanWordLengthFilter(0, None), SymbolRatioFilter()])
def test_all_null_text_column_is_scored_as_empty(f: DocumentFilter) -> None:
    """A text column that is entirely null (type null) is scored like empty texts, not an error."""
    nulls = DocumentBatch(task_id="b", data=pa.table({"text": pa.nulls(2)}))
    out = ScoreFilter(f, score_field="s").process(nulls)
    assert out.data.column("s").to_pylist() == [f.score_document("")] * 2


def test_missing_text_field_names_field_and_available_columns() -> None:
    """A ScoreFilter on a batch without its text_field raises InputError naming the batch's files, the
    field and the columns that do exist."""
    with pytest.raises(InputError) as info:
        ScoreFilter(WordCountFilter(), text_field="body").process(batch(["a"]))
    message = str(info.value)
    assert message.startswith("/data/in.jsonl: no field 'body' to filter on")
    assert "['id', 'text']" in message
    assert "text_field=" in message


def test_missing_text_field_fails_the_partition_once_in_a_pipeline(tmp_path: Path) -> None:
    """In a run (reader without fields, so build cannot tell) the missing field fails each partition on
    its first attempt, naming the file and the field."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"id": 1, "content": "x y z"}\n', encoding="utf-8")
    pipeline = (
        Pipeline("p")
        .add_stage(JsonlReader(tmp_path / "in"))
        .add_stage(ScoreFilter(WordCountFilter(), text_field="text"))
        .add_stage(JsonlWriter(tmp_path / "out"))
    )
    with pytest.raises(PipelineFailedError) as info:
        run(pipeline)
    (failed,) = info.value.result.failed
    assert failed.stage == "score_filter[word_count]"
    assert failed.attempts == 1
    assert f"{tmp_path / 'in' / 'a.jsonl'}: no field 'text'" in failed.error
    assert "['id', 'content', 'file_path']" in failed.error


def test_score_filter_refuses_a_non_filter() -> None:
    """ScoreFilter needs a DocumentFilter instance; a class or anything else is refused at construction."""
    with pytest.raises(TypeError, match="ScoreFilter needs a DocumentFilter instance"):
        ScoreFilter(WordCountFilter)  # type: ignore[arg-type]


class ShoutFilter(DocumentFilter):
    """A custom filter written on plain strings only: drops documents that are mostly upper case."""

    name = "shout"

    def score_document(self, text: str) -> float:
        assert isinstance(text, str), f"score_document got {text!r}"
        letters = [c for c in text if c.isalpha()]
        return sum(c.isupper() for c in letters) / len(letters) if letters else 0.0

    def keep_document(self, score: float) -> bool:
        return score < 0.5


CUSTOM_ROWS = [
    {"id": 1, "text": "a calm sentence"},
    {"id": 2, "text": "THIS IS SHOUTING"},
    {"id": 3, "text": None},
    {"id": 4, "text": "Mostly Calm, Some CAPS"},
    {"id": 5, "text": "ÜBER LAUT"},
]


@pytest.mark.parametrize("workers", [1, 2])
def test_custom_filter_with_only_per_document_methods_runs_in_a_pipeline(tmp_path: Path, workers: int) -> None:
    """A DocumentFilter implementing only score_document/keep_document works in a real run, in-process
    and in worker processes; null texts reach it as empty strings; score_field and the stage name work."""
    src = tmp_path / "in"
    src.mkdir()
    for i in range(2):
        rows = CUSTOM_ROWS[i::2]
        (src / f"{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out"
    pipeline = (
        Pipeline("custom")
        .add_stage(JsonlReader(src, file_path_field=None))
        .add_stage(ScoreFilter(ShoutFilter(), score_field="shout"))
        .add_stage(JsonlWriter(out))
    )
    assert pipeline.build()[2].name == "score_filter[shout]"
    pipeline.run(LocalExecutor(workers=workers, retry_backoff=0), shard=ShardSpec.single())
    rows = sorted(read_rows(out), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "text": "a calm sentence", "shout": 0.0},
        {"id": 3, "text": None, "shout": 0.0},
        {"id": 4, "text": "Mostly Calm, Some CAPS", "shout": pytest.approx(7 / 18)},
    ]
    assert sorted(p.name for p in out.iterdir() if p.name != DEFAULT_RUN_DIR_NAME) == sorted(
        p.name for p in out.glob("*.jsonl")
    )


def test_filter_without_any_scoring_method_says_what_to_implement() -> None:
    """A DocumentFilter subclass that implements nothing fails with a message naming the methods to write."""

    class Nothing(DocumentFilter):
        pass

    with pytest.raises(NotImplementedError, match="Nothing must implement score_document or score_array"):
        ScoreFilter(Nothing()).process(batch(["a"]))


def test_word_count_filter_in_a_pipeline_matches_python(corpus: Path, tmp_path: Path) -> None:
    """On the sample corpus, WordCountFilter(min_words=50) keeps exactly the documents with at least 50
    whitespace-separated words, and its score column is that count."""
    out = tmp_path / "out"
    run(
        Pipeline("p")
        .add_stage(JsonlReader(corpus, files_per_partition=6))
        .add_stage(ScoreFilter(WordCountFilter(min_words=50), score_field="words"))
        .add_stage(JsonlWriter(out))
    )
    docs = [json.loads(line) for p in sorted(corpus.glob("*.jsonl")) for line in p.read_text().splitlines()]
    expected = {d["id"] for d in docs if len(d["text"].split()) >= 50}
    rows = read_rows(out)
    assert {r["id"] for r in rows} == expected
    assert 0 < len(expected) < len(docs)
    assert all(r["words"] == len(r["text"].split()) for r in rows)

"""One contract for every filter (stages.filters.decide.BaseFilter): a NeMo DocumentFilter is a stage by itself,
ScoreFilter/Score/Filter take NeMo's lists and functions, every filter writes what it removed with its reason,
the funnel counts the text's characters (never a URL's), and Pipeline.build refuses a field nothing makes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_slurm import DocumentBatch, LocalExecutor, Pipeline, PipelineBuildError, ShardSpec
from curator_slurm.stages import (
    DocumentFilter,
    DocumentModifier,
    Filter,
    JsonlReader,
    JsonlWriter,
    LanguageFilter,
    Modify,
    NonAlphaNumericFilter,
    ParquetWriter,
    PornographicUrlsFilter,
    RepeatedLinesFilter,
    Score,
    ScoreFilter,
    WordCountFilter,
)
from curator_slurm.stages.filters.decide import REASON_FIELD, BaseFilter, Decision, first_reason

TEXTS = [
    "one two three four five six",
    "short text",
    "the same line\nthe same line\nthe same line\nthe same line",
    "",
    None,
    "!!! ??? ### $$$ %%% &&& *** ((( )))",
    "a b c d e f g h i j k l m n o p",
]


def batch(texts: list[str | None], **extra: list[Any]) -> DocumentBatch:
    table = pa.table({"id": list(range(len(texts))), "text": pa.array(texts, pa.string()), **extra})
    return DocumentBatch(task_id="b", data=table, metadata={"files": ["/data/in.jsonl"]}, source_id="src")


def _rows(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(directory.glob("*.jsonl")) for line in p.read_text().splitlines()]


def _corpus(root: Path, texts: list[str | None], **extra: list[Any]) -> Path:
    root.mkdir()
    for part in (0, 1):
        rows = [
            {"id": i, "text": t, **{k: v[i] for k, v in extra.items()}} for i, t in enumerate(texts) if i % 2 == part
        ]
        (root / f"part{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


# --- a NeMo DocumentFilter is a stage ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.one_of(st.none(), st.text(alphabet="ab \n!", max_size=30)), max_size=25))
def test_a_filter_added_itself_keeps_what_score_filter_keeps_and_excludes_the_rest(texts: list[str | None]) -> None:
    """For any texts: the filter as a stage keeps exactly ScoreFilter's rows, and kept + excluded are every row
    once; the exclusions hold the rows as they came in, with the filter's name as their reason."""
    f = WordCountFilter(min_words=2, max_words=5)
    alone = f.process(batch(texts)).data.column("id").to_pylist()
    assert alone == ScoreFilter(f).process(batch(texts)).data.column("id").to_pylist()
    captured: list[pa.Table] = []

    class Capture(JsonlWriter):
        def process(self, task: DocumentBatch) -> Any:
            captured.append(task.data)
            return task

    out = f.with_(exclusion_writer=Capture("/nowhere")).process(batch(texts)).data
    excluded = pa.concat_tables(captured) if captured else None
    gone = excluded.column("id").to_pylist() if excluded is not None else []
    assert sorted(out.column("id").to_pylist() + gone) == list(range(len(texts)))
    assert set(gone).isdisjoint(alone)
    if excluded is not None:
        assert set(excluded.column(REASON_FIELD).to_pylist()) == {"word_count"}
        assert excluded.column("text").to_pylist() == [texts[i] for i in gone]


def test_document_filters_run_in_a_pipeline_with_their_exclusions(tmp_path: Path) -> None:
    src = _corpus(tmp_path / "in", TEXTS)
    removed = tmp_path / "removed"
    (
        Pipeline("alone")
        .add_stage(JsonlReader(src, files_per_partition=1))
        .add_stage(WordCountFilter(min_words=3).with_(exclusion_writer=JsonlWriter(removed)))
        .add_stage(JsonlWriter(tmp_path / "out"))
        .run(LocalExecutor(workers=1), shard=ShardSpec.single())
    )
    kept = sorted(r["id"] for r in _rows(tmp_path / "out"))
    assert kept == [i for i, t in enumerate(TEXTS) if t and len(t.split()) >= 3]
    assert sorted((r["id"], r[REASON_FIELD]) for r in _rows(removed)) == [
        (i, "word_count") for i in range(len(TEXTS)) if i not in kept
    ]


# --- NeMo's lists and functions ----------------------------------------------------------------------------


def excluding(stage: Any, task: DocumentBatch) -> DocumentBatch:
    """``stage`` on ``task`` as the one batch of its source task: its exclusion file is published as it ends."""
    out = stage.process(task)
    stage.end_source(task, failed=False)
    return out


def test_a_list_of_filters_is_applied_in_order_naming_the_filter_that_removed_each(tmp_path: Path) -> None:
    filters = [WordCountFilter(min_words=3), NonAlphaNumericFilter(), RepeatedLinesFilter()]
    chained = ScoreFilter(filters, score_field=["words", "alnum", "unique"], exclusion_writer=JsonlWriter(tmp_path))
    assert chained.name == "score_filter[word_count+alpha_numeric+repeated_lines]"
    out = excluding(chained, batch(TEXTS)).data
    one_by_one = batch(TEXTS)
    for f in filters:
        one_by_one = ScoreFilter(f).process(one_by_one)
    assert out.column("id").to_pylist() == one_by_one.data.column("id").to_pylist()
    assert out.column_names == ["id", "text", "words", "alnum", "unique"]
    rows = {r["id"]: r for r in _rows(tmp_path)}
    assert rows[1][REASON_FIELD] == "word_count" and rows[1]["alnum"] is None, "a later filter never scored it"
    assert rows[2][REASON_FIELD] == "repeated_lines" and rows[2]["unique"] == 0.25
    assert rows[5][REASON_FIELD] == "alpha_numeric" and rows[5]["words"] == 9
    inverted = ScoreFilter(filters[:2], invert=[False, True]).process(batch(TEXTS)).data.column("id").to_pylist()
    assert inverted == [5, 6], "invert per filter: three words or more, and too few letters and digits"
    with pytest.raises(ValueError, match="score_field must be a list of strings if multiple filters are used"):
        ScoreFilter(filters, score_field="s")


def test_score_and_filter_take_lists_of_functions_and_filters() -> None:
    scored = Score([len, WordCountFilter()], score_field=["chars", "words"], text_field="text")
    table = scored.process(batch(["a b c", "de"])).data
    assert table.column("chars").to_pylist() == [5, 2] and table.column("words").to_pylist() == [3, 1]
    kept = Filter([lambda n: n > 2, WordCountFilter(min_words=3)], filter_field=["chars", "words"])
    assert kept.process(scored.process(batch(["a b c", "de", "abcdef"]))).data.column("id").to_pylist() == [0]
    with pytest.raises(ValueError, match="filter_field must be a list of strings if multiple filters are used"):
        Filter([len, len], filter_field="chars")
    assert Filter(lambda v: v, "x").name == "filter[<lambda>]"


# --- every filter writes what it removed -------------------------------------------------------------------


def test_the_language_filter_writes_what_it_removed_with_its_columns(tmp_path: Path) -> None:
    pytest.importorskip("pycld2")
    texts = [
        "The committee published its annual report on water quality in the river basin last week.",
        "Der Ausschuss hat letzte Woche seinen Jahresbericht über die Wasserqualität veröffentlicht.",
    ]
    removed = tmp_path / "removed"
    out = excluding(LanguageFilter("en", exclusion_writer=JsonlWriter(removed)), batch(texts)).data
    assert out.column("id").to_pylist() == [0]
    (row,) = _rows(removed)
    assert (row["id"], row["language"], row[REASON_FIELD]) == (1, "de", "language_filter")
    assert row["language_score"] > 0.5 and row["text"] == texts[1]


def test_a_score_filter_on_the_url_counts_the_texts_characters_not_the_urls() -> None:
    urls = ["https://example.org/porn/a", "https://example.org/fine", "https://porn.example/b"]
    texts = ["x" * 100, "kept", "y" * 7]
    out = ScoreFilter(PornographicUrlsFilter(), text_field="url").process(batch(texts, url=urls))
    assert out.data.column("id").to_pylist() == [1]
    assert out.metadata["removed_chars"] == {"dropped": 107, "rewritten": 0}
    pages = DocumentBatch(task_id="b", data=pa.table({"url": urls, "html": ["<p>1</p>", "<p>22</p>", "<p>333</p>"]}))
    assert ScoreFilter(PornographicUrlsFilter(), text_field="url").process(pages).metadata["removed_chars"] == {
        "dropped": 18,
        "rewritten": 0,
    }
    bare = DocumentBatch(task_id="b", data=pa.table({"url": urls}))
    assert "removed_chars" not in ScoreFilter(PornographicUrlsFilter(), text_field="url").process(bare).metadata


class DigitShare(BaseFilter):
    """A filter written on the contract alone (no framework module edited): two reasons, one column."""

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        values = texts.to_pylist()
        share = [sum(c.isdigit() for c in t) / max(len(t), 1) for t in values]
        import numpy as np

        rules = [("empty", np.array([not t for t in values])), ("digits", np.array(share) > 0.5)]
        decision = first_reason(rules, len(values))
        return Decision(decision.keep, decision.reasons, columns={"digit_share": pa.array(share)})


def test_a_new_filter_gets_exclusions_notes_and_characters_from_the_base(tmp_path: Path) -> None:
    texts = ["123456 ab", "plain words", "", "12 and 34 are numbers"]
    out = excluding(DigitShare(exclusion_writer=JsonlWriter(tmp_path)), batch(texts))
    assert out.data.column("id").to_pylist() == [1, 3]
    assert out.metadata["notes"]["counts"] == {"digits": 1, "empty": 1}
    assert out.metadata["removed_chars"] == {"dropped": 9, "rewritten": 0}
    assert [(r["id"], r[REASON_FIELD], r["digit_share"]) for r in _rows(tmp_path)] == [
        (0, "digits", pytest.approx(6 / 9)),
        (2, "empty", 0.0),
    ]


# --- names and fields --------------------------------------------------------------------------------------


class SpaceCollapser(DocumentModifier):
    def modify_document(self, text: str) -> str:
        return " ".join(text.split())


class TooShort(DocumentFilter):
    def __init__(self) -> None:
        super().__init__()
        self._name = "nemo_named"

    def score_document(self, text: str) -> int:
        return len(text)

    def keep_document(self, score: int) -> bool:
        return score > 3


def test_custom_modifiers_and_filters_are_named_after_their_class_or_their_own_name() -> None:
    assert Modify(SpaceCollapser()).name == "modify[space_collapser]"
    assert TooShort().name == "nemo_named" and ScoreFilter(TooShort()).name == "score_filter[nemo_named]"
    assert TooShort().with_(name="other").name == "other"


def test_a_field_no_stage_makes_is_refused_when_the_pipeline_is_built(tmp_path: Path) -> None:
    pytest.importorskip("fastwarc")
    from curator_slurm.stages import ResiliparseExtractor, WarcReader

    def pipeline(*middle: Any) -> Pipeline:
        p = Pipeline("p").add_stage(WarcReader(tmp_path))
        for stage in middle:
            p.add_stage(stage)
        return p.add_stage(ParquetWriter(tmp_path / "out"))

    english = Filter(lambda language: language == "ENGLISH", filter_field="language")
    with pytest.raises(PipelineBuildError, match=r"needs field\(s\) \['language'\].*'warc_reader'"):
        pipeline(english).build()
    with pytest.raises(
        PipelineBuildError, match=r"needs field\(s\) \['language'\].*'resiliparse_extractor' produces text"
    ):
        pipeline(ResiliparseExtractor(), english).build()  # as datatrove's, no language unless asked
    with_language = pipeline(ResiliparseExtractor(add_language=True), english).build()
    assert [s.name for s in with_language][-2] == "filter[<lambda>]"
    with pytest.raises(PipelineBuildError, match=r"needs field\(s\) \['language'\]"):
        Pipeline("q").add_stage(JsonlReader(tmp_path, fields=["text"])).add_stage(english).build()


def test_the_filter_that_writing_stages_shows_runs_with_its_exclusions(tmp_path: Path) -> None:
    """docs/writing-stages.md's filter, as printed there, in a pipeline: kept and removed documents, reasons."""
    import re

    from support.helpers import REPO

    markdown = (REPO / "docs" / "writing-stages.md").read_text()
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", markdown, re.S) if "(BaseFilter)" in b]
    namespace: dict[str, Any] = {}
    exec(compile(code, "writing-stages.md", "exec"), namespace)
    texts = ["call 555 0134 or 555 0199", "plain words only", "", "in 2024 the year was long enough"]
    src = _corpus(tmp_path / "in", texts)
    removed = tmp_path / "removed" / "digits"
    (
        Pipeline("digits")
        .add_stage(JsonlReader(src))
        .add_stage(namespace["DigitShareFilter"](0.2, exclusion_writer=JsonlWriter(removed)))
        .add_stage(JsonlWriter(tmp_path / "out"))
        .run(LocalExecutor(workers=1), shard=ShardSpec.single())
    )
    assert sorted(r["id"] for r in _rows(tmp_path / "out")) == [1, 3]
    assert sorted((r["id"], r[REASON_FIELD]) for r in _rows(removed)) == [(0, "too_many_digits"), (2, "empty")]
    assert all("digit_share" in r for r in _rows(removed))

"""NeMo's HTML extraction adds ``language`` with every algorithm; the project's extractors, as datatrove's, add
none unless asked; and a stage that needs a field no earlier stage makes is refused when the pipeline is built,
naming the stage, the field and what each earlier stage makes, not per task when it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from curator_slurm import Pipeline
from curator_slurm.errors import PipelineBuildError
from curator_slurm.nemo import (
    CommonCrawlHTMLExtractor,
    CommonCrawlWarcIterator,
    DocumentIterateExtractStage,
    FilePartitioningStage,
    Filter,
    JsonlReader,
    JsonlWriter,
    JusTextExtractor,
    ResiliparseExtractor,
    ScoreFilter,
    TrafilaturaExtractor,
    WordCountFilter,
)
from curator_slurm.stages import WarcReader
from support.docfiles import output_rows, run, write_jsonl
from support.webfixtures import build_warc, html_root

HANDBOOK = "debian-handbook"


@pytest.fixture(scope="module")
def warc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = html_root(HANDBOOK) / "en-US"
    files = sorted(root.glob("*.html"))[:8]
    return build_warc(tmp_path_factory.mktemp("nemo-extract") / "in" / "a.warc.gz", files, root)


def english_only(extractor: CommonCrawlHTMLExtractor, warc: Path, out: Path) -> Pipeline:
    return (
        Pipeline("nemo-extract")
        .add_stage(FilePartitioningStage(file_paths=str(warc.parent), file_extensions=[".warc.gz"]))
        .add_stage(DocumentIterateExtractStage(iterator=CommonCrawlWarcIterator(), extractor=extractor))
        .add_stage(Filter(filter_fn=lambda language: language == "ENGLISH", filter_field="language"))
        .add_stage(JsonlWriter(path=str(out)))
    )


@pytest.mark.parametrize(
    "algorithm",
    ["justext", "resiliparse", "trafilatura", ResiliparseExtractor(), TrafilaturaExtractor(), JusTextExtractor()],
    ids=["justext", "resiliparse", "trafilatura", "ResiliparseExtractor()", "TrafilaturaExtractor()", "JusText()"],
)
def test_every_nemo_algorithm_adds_language(algorithm: object, warc: Path, tmp_path: Path) -> None:
    """Each algorithm, by name or as an extractor built without add_language, gives every page NeMo's
    ``language``, so a language filter after it builds and runs and keeps the English pages."""
    run(english_only(CommonCrawlHTMLExtractor(algorithm=algorithm), warc, tmp_path / "out"))
    rows = output_rows(tmp_path / "out")
    assert rows, "the English pages are kept"
    assert all(list(r) == ["url", "warc_id", "source_id", "language", "text", "file_name"] for r in rows)
    assert {r["language"] for r in rows} == {"ENGLISH"}


def test_an_extractor_given_to_nemo_is_not_changed(warc: Path) -> None:
    """CommonCrawlHTMLExtractor uses a copy with the language on: the user's extractor keeps its own columns."""
    mine = TrafilaturaExtractor()
    nemo = CommonCrawlHTMLExtractor(algorithm=mine)
    assert "language" in nemo.algorithm.outputs()[1]
    assert "language" not in mine.outputs()[1] and not mine.add_language


@pytest.mark.parametrize("extractor", [TrafilaturaExtractor, ResiliparseExtractor])
def test_project_extractors_add_no_language_unless_asked(extractor: type, warc: Path, tmp_path: Path) -> None:
    """As datatrove's extractors: the text and the record's fields, no language; add_language=True adds it."""
    run(Pipeline("plain").add_stage(WarcReader(warc)).add_stage(extractor()).add_stage(JsonlWriter(tmp_path / "a")))
    plain = output_rows(tmp_path / "a")
    assert plain and not any("language" in r for r in plain)
    asked = Pipeline("asked").add_stage(WarcReader(warc)).add_stage(extractor(add_language=True))
    run(asked.add_stage(JsonlWriter(tmp_path / "b")))
    with_language = output_rows(tmp_path / "b")
    assert [r["text"] for r in with_language] == [r["text"] for r in plain]
    assert {r["language"] for r in with_language} == {"ENGLISH"}


def test_language_filter_without_a_language_is_refused_at_build(warc: Path, tmp_path: Path) -> None:
    """Swapping jusText for Trafilatura with a language filter after it fails before any data is read, naming
    the filter, the field and which stage made each field that does reach it."""
    out = tmp_path / "out"
    pipeline = (
        Pipeline("swap")
        .add_stage(WarcReader(warc))
        .add_stage(TrafilaturaExtractor())
        .add_stage(Filter(lambda language: language == "ENGLISH", "language"))
        .add_stage(JsonlWriter(out))
    )
    with pytest.raises(PipelineBuildError) as info:
        run(pipeline)
    message = str(info.value)
    assert "'filter[<lambda>]' needs field(s) ['language']" in message
    assert "'trafilatura_extractor' produces text" in message and "'warc_reader' produces" in message
    assert "add_language=True" in message
    assert not out.exists(), "nothing written"
    swapped = Pipeline("swap").add_stage(WarcReader(warc)).add_stage(JusTextExtractor())
    swapped.add_stage(Filter(lambda language: language == "ENGLISH", "language")).build()  # jusText makes it


def test_score_filter_on_a_field_nothing_makes_is_refused_at_build(warc: Path) -> None:
    pipeline = (
        Pipeline("p")
        .add_stage(FilePartitioningStage(file_paths=str(warc.parent), file_extensions=[".warc.gz"]))
        .add_stage(DocumentIterateExtractStage(iterator=CommonCrawlWarcIterator()))
        .add_stage(ScoreFilter(WordCountFilter(), text_field="title"))
    )
    with pytest.raises(PipelineBuildError, match=r"'score_filter\[word_count\]' needs field\(s\) \['title'\]"):
        pipeline.build()


def test_a_reader_whose_fields_are_unknown_is_not_refused(tmp_path: Path) -> None:
    """A JSONL reader without fields=[...] may give any field: the filter on ``language`` runs, and a batch
    without the field fails its task then, as it must."""
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "a b", "language": "ENGLISH"}, {"text": "c", "language": "X"}])
    pipeline = (
        Pipeline("p")
        .add_stage(JsonlReader(file_paths=str(tmp_path / "in")))
        .add_stage(Filter(lambda language: language == "ENGLISH", "language"))
        .add_stage(JsonlWriter(path=str(tmp_path / "out")))
    )
    run(pipeline)
    assert output_rows(tmp_path / "out") == [{"text": "a b", "language": "ENGLISH", "file_path": "a.jsonl"}]

"""Pipeline.build: the checks that run before any data is read, and their error messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from curator_slurm import LocalExecutor, Pipeline, PipelineBuildError, ShardSpec
from curator_slurm.stages import (
    CompositeStage,
    FilePartitioningStage,
    JsonlReader,
    JsonlReaderStage,
    JsonlWriter,
    ParquetReader,
    ParquetReaderStage,
    ParquetWriter,
    ProcessingStage,
    Resources,
    ScoreFilter,
    SymbolRatioFilter,
    WordCountFilter,
)


class ReadAndFilter(CompositeStage):
    """A composite made of another composite (a reader) and a filter."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def decompose(self) -> list[ProcessingStage]:
        return [JsonlReader(self.path, fields=["id", "text"]), ScoreFilter(WordCountFilter(min_words=3))]


class Nothing(CompositeStage):
    """A composite that decomposes into no stages."""

    def decompose(self) -> list[ProcessingStage]:
        return []


def test_empty_pipeline_is_refused_with_its_name() -> None:
    """A pipeline without stages fails build, and the message names the pipeline and says what to add."""
    with pytest.raises(PipelineBuildError, match=r"pipeline 'nothing' has no stages; add a reader"):
        Pipeline("nothing").build()


def test_empty_pipeline_run_fails_before_any_executor_work() -> None:
    """run() builds first, so an empty pipeline never reaches the executor."""
    with pytest.raises(PipelineBuildError, match="has no stages"):
        Pipeline("nothing").run(LocalExecutor(workers=1), shard=ShardSpec.single())


@pytest.mark.parametrize("bad", [JsonlWriter, ScoreFilter, "jsonl_reader", None])
def test_add_stage_refuses_non_instances(bad: object) -> None:
    """add_stage takes stage instances only; passing the class gets a hint about instantiating it."""
    pipeline = Pipeline("p")
    with pytest.raises(PipelineBuildError, match=r"pipeline 'p': add_stage got ") as info:
        pipeline.add_stage(bad)  # type: ignore[arg-type]
    if isinstance(bad, type):
        assert f"the class {bad.__name__}; pass an instance, e.g. {bad.__name__}(...)" in str(info.value)
    else:
        assert f"got {type(bad).__name__}, which is not a ProcessingStage" in str(info.value)
    assert pipeline.stages == []


def test_constructor_stages_are_checked_like_add_stage() -> None:
    """Pipeline(stages=[...]) goes through the same check as add_stage."""
    with pytest.raises(PipelineBuildError, match="add_stage got the class JsonlWriter"):
        Pipeline("p", stages=[JsonlWriter])  # type: ignore[list-item]


def test_add_stage_returns_the_pipeline_for_chaining(tmp_path: Path) -> None:
    """add_stage returns the pipeline itself, so stages can be chained in order."""
    pipeline = Pipeline("p")
    reader, writer = JsonlReader(tmp_path), JsonlWriter(tmp_path / "out")
    assert pipeline.add_stage(reader).add_stage(writer) is pipeline
    assert pipeline.stages == [reader, writer]


def test_jsonl_reader_decomposes_into_partitioning_and_reading(tmp_path: Path) -> None:
    """JsonlReader is a composite: build replaces it by a FilePartitioningStage and a JsonlReaderStage."""
    flat = Pipeline("p").add_stage(JsonlReader(tmp_path)).add_stage(JsonlWriter(tmp_path / "out")).build()
    assert [type(s) for s in flat] == [FilePartitioningStage, JsonlReaderStage, JsonlWriter]
    assert [s.name for s in flat] == ["file_partitioning", "jsonl_reader", "jsonl_writer"]


def test_parquet_reader_decomposes_into_partitioning_and_reading(tmp_path: Path) -> None:
    """ParquetReader decomposes the same way, into a ParquetReaderStage."""
    flat = Pipeline("p").add_stage(ParquetReader(tmp_path)).add_stage(ParquetWriter(tmp_path / "out")).build()
    assert [type(s) for s in flat] == [FilePartitioningStage, ParquetReaderStage, ParquetWriter]


def test_nested_composites_are_flattened_recursively(tmp_path: Path) -> None:
    """A composite whose parts are composites is flattened all the way down, in order."""
    flat = Pipeline("p").add_stage(ReadAndFilter(tmp_path)).add_stage(JsonlWriter(tmp_path / "out")).build()
    assert [type(s) for s in flat] == [FilePartitioningStage, JsonlReaderStage, ScoreFilter, JsonlWriter]
    assert not any(isinstance(s, CompositeStage) for s in flat)


def test_composite_without_parts_is_refused() -> None:
    """A composite that decomposes into nothing fails build and is named."""
    with pytest.raises(PipelineBuildError, match=r"composite stage 'nothing' decomposed into no stages"):
        Pipeline("p").add_stage(Nothing()).build()


def test_build_marks_first_stage_source_and_last_stage_sink(tmp_path: Path) -> None:
    """After decomposition, exactly the first stage is the source and exactly the last is the sink."""
    flat = (
        Pipeline("p")
        .add_stage(JsonlReader(tmp_path))
        .add_stage(ScoreFilter(WordCountFilter()))
        .add_stage(ScoreFilter(SymbolRatioFilter()))
        .add_stage(ParquetWriter(tmp_path / "out"))
        .build()
    )
    assert [s.is_source_stage for s in flat] == [True, False, False, False, False]
    assert [s.is_sink_stage for s in flat] == [False, False, False, False, True]


def test_single_stage_pipeline_is_both_source_and_sink(tmp_path: Path) -> None:
    """A one-stage pipeline's only stage is both source and sink."""
    (stage,) = Pipeline("p").add_stage(FilePartitioningStage(tmp_path)).build()
    assert stage.is_source_stage and stage.is_sink_stage


def test_filter_on_a_field_the_reader_does_not_read_fails_build(tmp_path: Path) -> None:
    """A ScoreFilter on a field outside the reader's fields=[...] fails build, naming the pipeline, the
    stage and its position, the missing field, and which stage produces each field that does reach it."""
    pipeline = (
        Pipeline("curate")
        .add_stage(JsonlReader(tmp_path, fields=["id", "text"]))
        .add_stage(ScoreFilter(WordCountFilter(), text_field="body"))
        .add_stage(JsonlWriter(tmp_path / "out"))
    )
    with pytest.raises(PipelineBuildError) as info:
        pipeline.build()
    message = str(info.value)
    assert "pipeline 'curate'" in message
    assert "stage 2 'score_filter[word_count]'" in message
    assert "['body']" in message
    assert "'jsonl_reader' produces id, text" in message
    assert "fields=[...]" in message


def test_build_error_happens_before_any_data_is_read_or_written(tmp_path: Path) -> None:
    """run() on a pipeline that does not fit together raises before the writer creates anything."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"id": 1, "text": "a b c"}\n', encoding="utf-8")
    out = tmp_path / "out"
    pipeline = (
        Pipeline("p")
        .add_stage(JsonlReader(tmp_path / "in", fields=["id"]))
        .add_stage(ScoreFilter(WordCountFilter()))
        .add_stage(JsonlWriter(out))
    )
    with pytest.raises(PipelineBuildError, match=r"needs field\(s\) \['text'\]"):
        pipeline.run(LocalExecutor(workers=1), shard=ShardSpec.single())
    assert not out.exists()


def test_second_filter_names_the_filter_before_it_as_producer(tmp_path: Path) -> None:
    """When the missing field is needed after a filter, the message names each field that reaches the stage with
    the stage that made it: the reader's fields and the filter's score."""
    pipeline = (
        Pipeline("p")
        .add_stage(JsonlReader(tmp_path, fields=["text"]))
        .add_stage(ScoreFilter(WordCountFilter(), score_field="words"))
        .add_stage(ScoreFilter(SymbolRatioFilter(), text_field="title"))
    )
    with pytest.raises(PipelineBuildError) as info:
        pipeline.build()
    message = str(info.value)
    assert "stage 3 'score_filter[symbol_ratio]'" in message
    assert "['title']" in message
    assert "'jsonl_reader' produces text; 'score_filter[word_count]' produces words" in message


def test_writer_fields_are_checked_against_what_reaches_it(tmp_path: Path) -> None:
    """A writer's fields=[...] are inputs too: writing a field nobody produces fails build."""
    pipeline = (
        Pipeline("p").add_stage(JsonlReader(tmp_path, fields=["text"])).add_stage(ParquetWriter(tmp_path, ["id"]))
    )
    with pytest.raises(PipelineBuildError, match=r"'parquet_writer' needs field\(s\) \['id'\]"):
        pipeline.build()


def test_reader_without_fields_lets_any_field_pass_build(tmp_path: Path) -> None:
    """Fields are unknown when the reader has no fields=[...], so build cannot refuse a filter's field."""
    flat = (
        Pipeline("p")
        .add_stage(JsonlReader(tmp_path))
        .add_stage(ScoreFilter(WordCountFilter(), text_field="anything"))
        .add_stage(ParquetWriter(tmp_path / "out", fields=["whatever"]))
        .build()
    )
    assert len(flat) == 4


def test_score_field_passes_through_to_later_stages(tmp_path: Path) -> None:
    """A ScoreFilter passes its input fields through and adds score_field, so a later filter on the
    score, and a writer of the original and score fields, build."""
    flat = (
        Pipeline("p")
        .add_stage(JsonlReader(tmp_path, fields=["id", "text"]))
        .add_stage(ScoreFilter(WordCountFilter(), score_field="words"))
        .add_stage(ScoreFilter(SymbolRatioFilter(), text_field="words"))
        .add_stage(ScoreFilter(SymbolRatioFilter(), text_field="text"))
        .add_stage(ParquetWriter(tmp_path / "out", fields=["id", "text", "words"]))
        .build()
    )
    assert [s.name for s in flat][-2:] == ["score_filter[symbol_ratio]", "parquet_writer"]


def test_without_score_field_the_score_is_not_available(tmp_path: Path) -> None:
    """Only score_field adds a field: a later stage cannot use a score that was not kept."""
    pipeline = (
        Pipeline("p")
        .add_stage(JsonlReader(tmp_path, fields=["text"]))
        .add_stage(ScoreFilter(WordCountFilter()))
        .add_stage(ScoreFilter(SymbolRatioFilter(), text_field="words"))
    )
    with pytest.raises(PipelineBuildError, match=r"\['words'\]"):
        pipeline.build()


def test_with_overrides_settings_on_a_copy() -> None:
    """with_() returns a new stage with the overrides; the original instance and its class keep theirs."""
    original = ScoreFilter(WordCountFilter(min_words=5))
    copy = original.with_(name="wc", batch_size=8, max_retries=0, resources=Resources(cpus=2, gpus=0.5))
    assert copy is not original
    assert isinstance(copy, ScoreFilter)
    assert (copy.name, copy.batch_size, copy.max_retries, copy.resources) == ("wc", 8, 0, Resources(2, 0.5))
    assert (original.name, original.batch_size, original.max_retries, original.resources) == (
        "score_filter[word_count]",
        1,
        2,
        Resources(),
    )
    assert (ScoreFilter.batch_size, ScoreFilter.max_retries, ScoreFilter.resources) == (1, 2, Resources())
    assert copy.filter_obj.min_words == 5


def test_with_without_arguments_keeps_every_setting(tmp_path: Path) -> None:
    """with_() with no overrides is a plain copy with the same settings."""
    original = JsonlWriter(tmp_path, fields=["text"])
    copy = original.with_()
    assert copy is not original
    assert copy.params() == original.params()


def test_with_name_shows_up_in_the_built_pipeline(tmp_path: Path) -> None:
    """A renamed copy is what build returns, under its new name."""
    flat = (
        Pipeline("p")
        .add_stage(JsonlReader(tmp_path))
        .add_stage(ScoreFilter(WordCountFilter()).with_(name="long_enough", batch_size=4))
        .build()
    )
    assert flat[-1].name == "long_enough"
    assert flat[-1].batch_size == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, r"batch_size=0\): batch_size must be >= 1"),
        ({"batch_size": -3}, r"batch_size=-3\): batch_size must be >= 1"),
        ({"max_retries": -1}, r"max_retries=-1\): max_retries must be >= 0"),
    ],
)
def test_with_rejects_bad_values_and_leaves_original_alone(kwargs: dict[str, int], message: str) -> None:
    """with_() refuses batch sizes below 1 and negative retries with a message naming the stage."""
    original = ScoreFilter(WordCountFilter())
    with pytest.raises(ValueError, match=r"score_filter\[word_count\]\.with_\(" + message):
        original.with_(**kwargs)
    assert (original.batch_size, original.max_retries) == (1, 2)


def test_resources_refuse_negative_values() -> None:
    """Resources with a negative count are refused with both values in the message."""
    with pytest.raises(ValueError, match=r"Resources\(cpus=-1, gpus=0.0\): both must be >= 0"):
        Resources(cpus=-1)

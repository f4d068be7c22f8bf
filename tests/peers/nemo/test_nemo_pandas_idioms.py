"""NeMo Curator's batch and pipeline idioms, as a NeMo user writes them: a stage written on pandas
(``batch.to_pandas()``, a new ``DocumentBatch(data=df, _metadata=..., _stage_perf=...)``), a function made a stage
by ``@processing_stage``, and ``Pipeline.describe()``; each runs sharded and resumed like any stage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.nemo import (
    DocumentBatch,
    HistogramFilter,
    JsonlReader,
    NumberOfLinesOfCodeFilter,
    ParquetWriter,
    ProcessingStage,
    ScoreFilter,
    processing_stage,
)
from curator_slurm.stages.filters.histogram import HISTOGRAM_PATH
from support.helpers import clean_env

pd = pytest.importorskip("pandas")

TEXTS = [f"doc {i} " + ("nvidia " if i % 3 == 0 else "") + "word " * (i % 7) for i in range(40)]


class KeepNvidia(ProcessingStage[DocumentBatch, DocumentBatch]):
    """A NeMo stage on pandas, as NeMo's tutorials write one (unchanged but for its imports)."""

    name = "keep_nvidia"

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], ["text"]

    def outputs(self) -> tuple[list[str], list[str]]:
        return ["data"], ["text", "n_words"]

    def process(self, batch: DocumentBatch) -> DocumentBatch:
        df = batch.to_pandas()
        df = df[df["text"].str.contains("nvidia")]
        df["n_words"] = df["text"].str.split().str.len()
        return DocumentBatch(
            dataset_name=batch.dataset_name, data=df, _metadata=batch._metadata, _stage_perf=batch._stage_perf
        )


@processing_stage(name="shout")
def shout(batch: DocumentBatch) -> DocumentBatch:
    df = batch.to_pandas()
    df["text"] = df["text"].str.upper()
    batch.data = df  # NeMo's decorator idiom: the data replaced by a frame (made Arrow again here)
    return batch


def _corpus(root: Path) -> Path:
    root.mkdir()
    for f in range(4):
        lines = [json.dumps({"text": t}) for t in TEXTS[f * 10 : (f + 1) * 10]]
        (root / f"part{f}.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _pipeline(src: Path, out: Path) -> Pipeline:
    return Pipeline("nemo_pandas", [JsonlReader(str(src)), KeepNvidia(), shout, ParquetWriter(str(out))])


def _rows(out: Path) -> list[dict[str, Any]]:
    rows = [r for p in sorted(out.glob("*.parquet")) for r in pq.read_table(p, columns=["text", "n_words"]).to_pylist()]
    return sorted(rows, key=lambda r: r["text"])


def test_a_stage_written_on_pandas_and_a_decorated_function_run_sharded_exactly_once(tmp_path: Path) -> None:
    src = _corpus(tmp_path / "in")
    _pipeline(src, tmp_path / "whole").run(LocalExecutor(workers=1))
    expected = [{"text": t.upper(), "n_words": len(t.split())} for t in sorted(TEXTS) if "nvidia" in t]
    assert _rows(tmp_path / "whole") == sorted(expected, key=lambda r: r["text"])
    for index in range(3):  # three array tasks, then one again: nothing lost, nothing twice
        _pipeline(src, tmp_path / "sharded").run(LocalExecutor(workers=1), shard=ShardSpec(index=index, count=3))
    _pipeline(src, tmp_path / "sharded").run(LocalExecutor(workers=1), shard=ShardSpec(index=1, count=3))
    assert _rows(tmp_path / "sharded") == _rows(tmp_path / "whole")
    names = sorted(p.name for p in (tmp_path / "sharded").glob("*.parquet"))
    assert names == sorted(p.name for p in (tmp_path / "whole").glob("*.parquet")), "outputs named by lineage"


def test_a_batch_converts_both_ways_and_keeps_its_provenance() -> None:
    df = pd.DataFrame({"text": ["a", "b", "c"], "n": [1, 2, 3]})
    batch = DocumentBatch(task_id="t", dataset_name="d", data=df[df["n"] > 1], _metadata={"files": ["x"]})
    assert batch.to_pyarrow().column("text").to_pylist() == ["b", "c"]
    assert str(batch.to_pyarrow().schema.field("text").type) == "string"
    assert batch.to_pandas().to_dict("list") == {"text": ["b", "c"], "n": [2, 3]}
    assert batch._metadata == batch.metadata == {"files": ["x"]} and batch.get_columns() == ["text", "n"]
    assert batch.derive(batch.to_pandas().head(1)).data.num_rows == 1


def test_processing_stage_fingerprints_its_function_and_checks_its_signature() -> None:
    @processing_stage(name="one")
    def first(task: DocumentBatch) -> DocumentBatch:
        return task

    @processing_stage(name="one")
    def second(task: DocumentBatch) -> DocumentBatch:
        return task

    assert first.name == "one" and first.params() != second.params()
    with pytest.raises(ValueError, match="exactly one positional argument"):
        processing_stage(name="bad")(lambda a, b: a)


def test_describe_lists_each_stage_with_its_fields(tmp_path: Path) -> None:
    text = _pipeline(tmp_path, tmp_path / "out").describe()
    assert text.startswith("Pipeline: nemo_pandas\nDescription: No description provided\nStages: 4\n")
    assert "Stage 2: keep_nvidia\n  Resources: 1.0 CPUs\n  Batch size: 1\n  Inputs:\n" in text
    assert "    Output columns: text, n_words" in text and "Stage 3: shout" in text


def test_histogram_filter_reads_the_histogram_it_is_given(tmp_path: Path) -> None:
    hist = tmp_path.joinpath(*HISTOGRAM_PATH)
    hist.mkdir(parents=True)
    (hist / "en").write_text("".join(c + " 10\n" for c in "abcdefghijklmnopqrstuvwxyz ") + "] 0\nz 1\n")
    f = HistogramFilter(lang="en", cache_dir=str(tmp_path))
    assert [f.score_document(t) for t in ["plain words", "数字 and 文字", "] ] ]"]] == [1, 0, 0]
    with pytest.raises(FileNotFoundError, match="downloads nothing"):
        HistogramFilter(lang="xx", cache_dir=str(tmp_path))


def test_new_filters_put_their_parameters_in_the_fingerprint() -> None:
    assert (
        ScoreFilter(NumberOfLinesOfCodeFilter(2, 3)).params() != ScoreFilter(NumberOfLinesOfCodeFilter(2, 4)).params()
    )


def test_pandas_stays_out_of_the_core_import() -> None:
    code = "import sys, curator_slurm.nemo, curator_slurm.stages; assert 'pandas' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env=clean_env())

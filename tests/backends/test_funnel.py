"""Per-stage document counts (the funnel): in-process from PipelineResult.funnel(), and for a whole run
directory, summed over every shard, from `curator-slurm status` (issue 17, item 6)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.stages import JsonlReader, ParquetWriter, ScoreFilter, WordCountFilter
from helpers import clean_env


def _pipeline(corpus: Path, out: Path) -> Pipeline:
    return (
        Pipeline("funnel")
        .add_stage(JsonlReader(str(corpus)))
        .add_stage(ScoreFilter(WordCountFilter(min_words=50)))
        .add_stage(ScoreFilter(WordCountFilter(min_words=60)))
        .add_stage(ParquetWriter(out))
    )


def _documents(corpus: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in corpus.glob("*.jsonl"))


def test_the_funnel_of_one_process_and_of_a_whole_array_agree_with_the_data(corpus: Path, tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    result = _pipeline(corpus, whole).run(LocalExecutor(workers=1), ShardSpec.single())
    written = pq.read_table(whole).num_rows
    funnel = result.funnel()
    assert funnel[0].stage == "jsonl_reader" and funnel[-1].stage == "parquet_writer"
    reader, first, second, writer = funnel
    assert reader.rows_out == first.rows_in == _documents(corpus) == 720
    assert first.rows_out == second.rows_in and second.rows_out == writer.rows_in == writer.rows_out == written
    assert first.dropped + second.dropped == 720 - written and first.dropped > 0 and second.dropped > 0

    sharded = tmp_path / "sharded"
    for i in range(3):
        _pipeline(corpus, sharded).run(LocalExecutor(workers=2), ShardSpec.explicit(i, 3))
    records = [r for r in iter_records(str(sharded / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]
    assert len({r["shard"] for r in records}) == 3
    status = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(sharded / DEFAULT_RUN_DIR_NAME), "--json"],
        capture_output=True, text=True, env=clean_env(), check=True,
    )  # fmt: skip
    assert json.loads(status.stdout)["funnel"] == [r.as_dict() for r in funnel]
    text = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(sharded / DEFAULT_RUN_DIR_NAME)],
        capture_output=True, text=True, env=clean_env(), check=True,
    ).stdout  # fmt: skip
    line = next(x for x in text.splitlines() if x.strip().startswith(first.stage))
    assert line.split()[1:] == [str(first.rows_in), str(first.rows_out), str(first.dropped)]

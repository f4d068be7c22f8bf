"""Per-stage document counts (the funnel): in-process from PipelineResult.funnel(), and for a whole run
directory, summed over every shard, from `curator-slurm status` (issue 17, item 6); with the characters each
filter removed (issue 27), unknown for stages that are not filters and in records written before."""

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
from support.helpers import clean_env


def _pipeline(corpus: Path, out: Path) -> Pipeline:
    return (
        Pipeline("funnel")
        .add_stage(JsonlReader(str(corpus)))
        .add_stage(ScoreFilter(WordCountFilter(min_words=50)))
        .add_stage(ScoreFilter(WordCountFilter(min_words=60)))
        .add_stage(ParquetWriter(out))
    )


def _untimed(funnel: list[dict]) -> list[dict]:
    """The funnel without its seconds (one run's timing is not another's), which must be there."""
    assert all(isinstance(row["seconds"], float) for row in funnel)
    return [{k: v for k, v in row.items() if k != "seconds"} for row in funnel]


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
    assert _untimed(json.loads(status.stdout)["funnel"]) == _untimed([r.as_dict() for r in funnel])
    text = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(sharded / DEFAULT_RUN_DIR_NAME)],
        capture_output=True, text=True, env=clean_env(), check=True,
    ).stdout  # fmt: skip
    line = next(x for x in text.splitlines() if x.strip().startswith(first.stage))
    assert line.split()[1:] == [str(first.rows_in), str(first.rows_out), str(first.dropped), str(first.chars_removed)]


WORDS = ["café", "naïve", "日本語", "straße", "🙂", "plain", "words", "ok"]


def _unicode_corpus(root: Path) -> list[str | None]:
    """4 JSONL files of documents of 1 to 30 words, many with characters of 2, 3 and 4 UTF-8 bytes (so
    characters and bytes differ), and one null text."""
    import random

    rng = random.Random(27)
    texts: list[str | None] = []
    root.mkdir()
    for part in range(4):
        rows = []
        for i in range(25):
            text = None if (part, i) == (2, 3) else " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30)))
            texts.append(text)
            rows.append(json.dumps({"id": f"{part}-{i}", "text": text}, ensure_ascii=False) + "\n")
        (root / f"part{part}.jsonl").write_text("".join(rows), encoding="utf-8")
    return texts


def _chars_pipeline(corpus: Path, out: Path) -> Pipeline:
    return (
        Pipeline("chars")
        .add_stage(JsonlReader(str(corpus), files_per_partition=1))
        .add_stage(ScoreFilter(WordCountFilter(min_words=10)))
        .add_stage(ScoreFilter(WordCountFilter(min_words=20)))
        .add_stage(ParquetWriter(out))
    )


def _status(run_dir: Path, *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(run_dir), *args],
        capture_output=True, text=True, env=clean_env(), check=True,
    ).stdout  # fmt: skip


def test_the_funnel_counts_the_characters_each_filter_removed(tmp_path: Path) -> None:
    texts = _unicode_corpus(tmp_path / "in")
    assert any(t and len(t) != len(t.encode()) for t in texts)
    # Recomputed here: a document goes at the first filter its word count fails; its characters are len(text).
    words = [len(t.split()) if t else 0 for t in texts]
    first = sum(len(t or "") for t, w in zip(texts, words, strict=True) if w < 10)
    second = sum(len(t or "") for t, w in zip(texts, words, strict=True) if 10 <= w < 20)
    assert first and second

    result = _chars_pipeline(tmp_path / "in", tmp_path / "whole").run(LocalExecutor(workers=1), ShardSpec.single())
    _, f1, f2, writer = result.funnel()
    assert (f1.chars_dropped, f1.chars_rewritten, f1.chars_removed) == (first, 0, first)
    assert (f2.chars_dropped, f2.chars_removed) == (second, second)
    assert f1.dropped == sum(w < 10 for w in words) and f2.dropped == sum(10 <= w < 20 for w in words)
    assert writer.chars_removed is None, "a writer is not a filter: what it removed is unknown, not 0"
    written = pq.read_table(tmp_path / "whole").column("text").to_pylist()
    assert sum(len(t or "") for t in texts) - sum(map(len, written)) == first + second

    sharded = tmp_path / "sharded"
    for i in range(3):
        _chars_pipeline(tmp_path / "in", sharded).run(LocalExecutor(workers=1), ShardSpec.explicit(i, 3))
    run_dir = sharded / DEFAULT_RUN_DIR_NAME
    funnel = json.loads(_status(run_dir, "--json"))["funnel"]
    assert _untimed(funnel) == _untimed([row.as_dict() for row in result.funnel()])
    rows = [x.split() for x in _status(run_dir).splitlines() if x.startswith("  score_filter[")]
    assert [r[1:] for r in rows] == [
        [str(f.rows_in), str(f.rows_out), str(f.dropped), str(f.chars_removed)] for f in (f1, f2)
    ]
    writer_line = next(x for x in _status(run_dir).splitlines() if x.startswith("  parquet_writer"))
    assert writer_line.split()[-1] == "-"


def test_records_written_before_characters_were_counted_leave_them_unknown(tmp_path: Path) -> None:
    """A ledger of an older release (stages as [name, rows_in, rows_out]) still gives its documents; the
    characters of a stage are unknown (null, `-`) as soon as one done record lacks them, never 0."""
    _unicode_corpus(tmp_path / "in")
    out = tmp_path / "out"
    _chars_pipeline(tmp_path / "in", out).run(LocalExecutor(workers=1), ShardSpec.single())
    run_dir = out / DEFAULT_RUN_DIR_NAME
    before = json.loads(_status(run_dir, "--json"))["funnel"]
    assert before[1]["chars_removed"] > 0
    path = next(p for p in run_dir.rglob("*.jsonl") if '"stages"' in p.read_text())
    records = [json.loads(line) for line in path.read_text().splitlines()]
    # One done record (of 4) as an older release wrote it: one whose every stage after the reader took documents in.
    old = next(r for r in records if r["status"] == "done" and all(e[1] for e in r["stages"][1:]))
    old["stages"] = [entry[:3] for entry in old["stages"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    after = json.loads(_status(run_dir, "--json"))["funnel"]
    assert [(r["rows_in"], r["rows_out"]) for r in after] == [(r["rows_in"], r["rows_out"]) for r in before]
    assert [r["chars_removed"] for r in after[1:]] == [None, None, None]
    assert after[0]["chars_removed"] == 0, "a reader takes no documents in: it removed none"
    line = next(x for x in _status(run_dir).splitlines() if x.startswith("  score_filter["))
    assert line.split()[-1] == "-"

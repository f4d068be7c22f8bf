"""Starting over: a run that starts afresh (its run directory new) in an output holding files its writer could
have written refuses, naming them and the way to clear them, so that outputs of two runs never mix (rows twice
after another partitioning, stale token parts beside new ones); CURATOR_CLEAR_OUTPUT=1 clears them first."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from support.helpers import REPO, clean_env
from support.megatron_files import corpus_texts, read_megatron, train_tokenizer

CURATE = REPO / "examples" / "curate.py"
TOKENIZE = REPO / "examples" / "tokenize_corpus.py"


def run(cmd: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *cmd], capture_output=True, text=True, env=clean_env(env), timeout=600)


def rows(out: Path) -> int:
    return sum(pq.read_metadata(p).num_rows for p in out.glob("*.parquet"))


def test_another_partitioning_after_the_run_directory_was_deleted_never_doubles_the_rows(
    corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first = run([str(CURATE), "--input", str(corpus), "--output", str(out), "--files-per-partition", "3"])
    assert first.returncode == 0, first.stderr[-2000:]
    expected = rows(out)
    stale = sorted(out.glob("*.parquet"))
    shutil.rmtree(out / ".curator-run")  # "delete it to start over"

    again = [str(CURATE), "--input", str(corpus), "--output", str(out), "--files-per-partition", "1"]
    refused = run(again)
    assert refused.returncode != 0
    assert f"{len(stale)} file(s) in the output are no run's" in refused.stderr, refused.stderr[-2000:]
    assert str(stale[0]) in refused.stderr and "CURATOR_CLEAR_OUTPUT=1" in refused.stderr
    assert sorted(out.glob("*.parquet")) == stale, "a refused run writes nothing"

    cleared = run(again, CURATOR_CLEAR_OUTPUT="1")
    assert cleared.returncode == 0, cleared.stderr[-2000:]
    assert rows(out) == expected, "every document once, none from the earlier partitioning"
    assert not set(stale) & set(out.glob("*.parquet")), "no file of the earlier run is left"


def test_a_resumed_run_is_not_refused_by_its_own_outputs(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [str(CURATE), "--input", str(corpus), "--output", str(out)]
    assert run(cmd).returncode == 0
    again = run(cmd)
    assert again.returncode == 0 and "already done" in again.stderr


def test_stale_token_parts_are_refused_then_cleared(tmp_path: Path, corpus: Path) -> None:
    tokenizer = tmp_path / "tokenizer.json"
    train_tokenizer(tokenizer, list(corpus_texts(corpus)), vocab_size=600)
    out = tmp_path / "tokens"
    base = [str(TOKENIZE), "--input", str(corpus), "--output", str(out), "--tokenizer", str(tokenizer), "--no-eos"]
    first = run([*base, "--merge-tokens", "3000"])
    assert first.returncode == 0, first.stderr[-2000:]
    parts = sorted(out.glob("part_*.bin"))
    assert len(parts) > 1
    shutil.rmtree(out / ".curator-work")  # the whole workflow afresh: its run directories and per-task pairs

    refused = run(base)
    assert refused.returncode != 0 and "are no run's" in refused.stderr, refused.stderr[-2000:]
    assert "part_00001.bin" in refused.stderr
    assert run(base, CURATOR_CLEAR_OUTPUT="1").returncode == 0
    assert sorted(p.name for p in out.glob("part_*")) == ["part_00000.bin", "part_00000.idx"]
    documents = len(read_megatron(out / "part_00000")["document_index"]) - 1
    assert documents == sum(1 for _ in corpus_texts(corpus))


@pytest.mark.parametrize("strategy", ["balanced"])
def test_the_balanced_strategy_refuses_new_inputs_that_shards_cannot_agree_on(
    corpus: Path, tmp_path: Path, strategy: str
) -> None:
    """A file added between two shards' starts: under the balanced strategy the shards would split different
    listings, and a file could be done by neither; accepting new inputs is refused, naming the way out."""
    data = tmp_path / "in"
    shutil.copytree(corpus, data)
    out = tmp_path / "out"
    env = {"CURATOR_SHARD_STRATEGY": strategy, "CURATOR_NUM_SHARDS": "2", "CURATOR_ACCEPT_NEW_INPUTS": "1"}
    cmd = [str(CURATE), "--input", str(data), "--output", str(out)]
    assert run(cmd, CURATOR_SHARD_INDEX="0", **env).returncode == 0
    shutil.copy(next(data.glob("*.jsonl")), data / "zz-added.jsonl")
    second = run(cmd, CURATOR_SHARD_INDEX="1", **env)
    assert second.returncode != 0
    assert "balanced strategy" in second.stderr and "curator-slurm submit" in second.stderr, second.stderr[-2000:]

"""examples/curate_web.py as a user runs it: its own process on a web-like corpus, once unsharded and as
four shards (CURATOR_SHARD_INDEX/CURATOR_NUM_SHARDS), which must write the same files, byte for byte.

The corpus is the example's own (--make-sample): curator_slurm.samples.corpus's made-up syllable text is not
English, so the language filter would rightly drop all of it and there would be nothing to compare."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.helpers import REPO, clean_env, read_tree

EXAMPLE = REPO / "examples" / "curate_web.py"


def run_web(*args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), *args], env=clean_env(env), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"curate_web.py {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def web_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("web") / "crawl"
    out = run_web("--make-sample", str(root), "--files", "6", "--docs-per-file", "80")
    assert "wrote 6 files of 80 documents" in out
    return root


def test_one_process_and_four_shards_write_the_same_files(web_corpus: Path, tmp_path: Path) -> None:
    single = tmp_path / "single"
    out = run_web("--input", str(web_corpus), "--output", str(single), "--workers", "1")
    m = re.search(r"(\d+) files written, (\d+) docs in, (\d+) docs out", out)
    assert m is not None, out
    files, docs_in, docs_out = map(int, m.groups())
    assert (files, docs_in) == (6, 480)
    assert 0 < docs_out < docs_in  # the filters did something, and something is left

    sharded = tmp_path / "sharded"
    for index in range(4):
        env = {"CURATOR_NUM_SHARDS": "4", "CURATOR_SHARD_INDEX": str(index)}
        run_web("--input", str(web_corpus), "--output", str(sharded), "--workers", "1", env=env)
    assert read_tree(sharded) == read_tree(single)

    table = pa.concat_tables([pq.read_table(p) for p in sorted(single.glob("*.parquet"))])
    assert table.num_rows == docs_out
    assert set(table.column_names) >= {"url", "text", "id", "language", "language_score"}
    ids = table.column("id").to_pylist()
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"web_[0-9a-f]{16}_\d+", i) for i in ids)
    assert set(table.column("language").to_pylist()) == {"en"}
    texts = table.column("text").to_pylist()
    # Unicode repair ran: the sample's mojibake apostrophes are gone and the real ones are there.
    assert not any("\u00e2\u20ac" in t for t in texts)
    assert any("city\u2019s" in t for t in texts)


def test_the_sample_is_deterministic(tmp_path: Path) -> None:
    for name in ("a", "b"):
        run_web("--make-sample", str(tmp_path / name), "--files", "2", "--docs-per-file", "30")
    assert read_tree(tmp_path / "a") == read_tree(tmp_path / "b")


def test_missing_arguments_are_a_usage_error() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLE)], env=clean_env(), capture_output=True, text=True)
    assert proc.returncode == 2
    assert "--input and --output are required" in proc.stderr

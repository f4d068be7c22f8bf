"""Input files whose names hold bytes that are not UTF-8 (POSIX allows any byte but ``/`` and NUL; Python
gives them as surrogate escapes): they are listed, read (JSONL, compressed JSONL, Parquet, WARC), given
source task ids and document ids that hash the name's bytes (so the ids of every other name stay what they
were), deduplicated, and named by ``status``/``failures``/``plan`` without a UnicodeEncodeError."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError, ShardSpec
from curator_slurm.stages import AddId, JsonlReader, JsonlWriter, ParquetReader, ParquetWriter
from curator_slurm.tasks import content_id
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from support.helpers import REPO, clean_env

FF = os.fsdecode(b"\xff.jsonl")  # the str Python gives for the name b"\xff.jsonl"
CAFE = os.fsdecode(b"caf\xe9.jsonl.gz")  # Latin-1 e-acute, compressed
TEXTS = {"ok.jsonl": ["one shared text", "only in ok"], FF: ["only in ff", "one shared text"], CAFE: ["in cafe"]}


def xxh(name: bytes) -> str:
    return xxhash.xxh64_hexdigest(name, seed=0)


def corpus(root: Path) -> Path:
    root.mkdir()
    for name, texts in TEXTS.items():
        data = "".join(
            json.dumps({"text": t, "f": os.fsencode(name).hex(), "i": i}) + "\n" for i, t in enumerate(texts)
        )
        if name.endswith(".gz"):
            (root / name).write_bytes(gzip.compress(data.encode()))
        else:
            (root / name).write_text(data)
    assert sorted(os.listdir(os.fsencode(root))) == sorted([b"ok.jsonl", b"\xff.jsonl", b"caf\xe9.jsonl.gz"])
    return root


def ids_pipeline(data: Path, out: Path) -> Pipeline:
    return Pipeline("ids").add_stage(JsonlReader(data)).add_stage(AddId("doc_id")).add_stage(JsonlWriter(out))


def rows(out: Path) -> list[dict]:
    return sorted(
        (json.loads(line) for p in out.glob("*.jsonl") for line in p.read_text().splitlines()),
        key=lambda r: (r["f"], r["i"]),
    )


def test_names_that_are_not_utf8_are_read_with_ids_that_hash_their_bytes(tmp_path: Path) -> None:
    data = corpus(tmp_path / "in")
    out = tmp_path / "out"
    result = ids_pipeline(data, out).run(LocalExecutor(workers=1))
    assert result.done == 3 and not result.failed
    got = rows(out)
    assert len(got) == 5
    for row in got:
        name = bytes.fromhex(row["f"])
        assert row["doc_id"] == f"{xxh(name)}_{row['i']}"  # the file hash is of the name's bytes
    assert content_id("ok.jsonl") == xxh(b"ok.jsonl")  # a UTF-8 name hashes as before
    # Source task ids hash the names' bytes too: an output is named by its source task.
    names = (b"ok.jsonl", b"\xff.jsonl", b"caf\xe9.jsonl.gz")
    assert {p.name for p in out.glob("*.jsonl")} == {f"{xxh(n)}.jsonl" for n in names}
    again = ids_pipeline(data, out).run(LocalExecutor(workers=1))
    assert again.source_tasks_skipped == 3 and again.done == 0  # the ids are stable: nothing is redone
    sharded = tmp_path / "sharded"
    for index in range(2):
        ids_pipeline(data, sharded).run(LocalExecutor(workers=1), shard=ShardSpec.explicit(index, 2))
    assert {p.name: p.read_bytes() for p in sharded.glob("*.jsonl")} == {
        p.name: p.read_bytes() for p in out.glob("*.jsonl")
    }


def test_a_parquet_file_whose_name_is_not_utf8_is_read_whole_and_in_pieces(tmp_path: Path) -> None:
    data = tmp_path / "in"
    data.mkdir()
    table = pa.table({"text": [f"document {i} " * 20 for i in range(2000)], "i": list(range(2000))})
    with open(os.fsencode(data) + b"/\xfe.parquet", "wb") as f:
        pq.write_table(table, f, row_group_size=100)
    for options in ({}, {"blocksize": 20_000, "split_files": True}):
        out = tmp_path / f"out{len(options)}"
        pipeline = Pipeline("pq").add_stage(ParquetReader(data, **options)).add_stage(AddId("doc_id"))
        pipeline.add_stage(ParquetWriter(out)).run(LocalExecutor(workers=1))
        parts = sorted(out.glob("*.parquet"))
        assert (len(parts) > 1) == bool(options)  # split: several source tasks of one file
        got = pa.concat_tables(pq.read_table(p) for p in parts).sort_by("i")
        assert got.column("i").to_pylist() == list(range(2000))
        file_hash = xxh(b"\xfe.parquet")
        assert got.column("doc_id").to_pylist() == [f"{file_hash}_{i}" for i in range(2000)]


def test_exact_dedup_across_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    data = corpus(tmp_path / "in")
    out = tmp_path / "out"
    ExactDuplicates(JsonlReader(data), JsonlWriter(out), identify_only=False).run(LocalExecutor(workers=1))
    texts = sorted(r["text"] for r in rows(out))
    assert texts == sorted({t for ts in TEXTS.values() for t in ts})  # every text once
    listing = tmp_path / "listing"
    ExactDuplicates(JsonlReader(data), JsonlWriter(listing), identify_only=True).run(LocalExecutor(workers=1))
    (found,) = pa.concat_tables(pq.read_table(p) for p in listing.glob("*.parquet")).to_pylist()
    # The list names the file with its byte as Python shows it; "ok.jsonl" sorts first and survives.
    assert (found["path"], found["row"], found["survivor_path"], found["survivor_row"]) == (
        "\\xff.jsonl",
        1,
        "ok.jsonl",
        0,
    )


def test_the_cli_names_a_failed_file_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """A damaged file with such a name fails its task; ``failures``, ``status`` and ``plan`` show it (the
    byte escaped) under a strict UTF-8 stdout, as a user's en_US.UTF-8 terminal has, instead of failing."""
    data = corpus(tmp_path / "in")
    (data / FF).write_text('{"text": "cut sh\n')
    out = tmp_path / "out"
    with pytest.raises(PipelineFailedError):
        ids_pipeline(data, out).run(LocalExecutor(workers=1))
    env = clean_env({"PYTHONIOENCODING": "utf-8:strict"})
    cli = [sys.executable, "-m", "curator_slurm.cli"]
    run_dir = str(out / ".curator-run")
    failures = subprocess.run([*cli, "failures", run_dir], env=env, capture_output=True, text=True)
    assert failures.returncode == 0, failures.stderr
    assert f"{data}/\\udcff.jsonl" in failures.stdout
    status = subprocess.run([*cli, "status", run_dir], env=env, capture_output=True, text=True)
    assert "1 failed" in status.stdout, status.stderr
    script = tmp_path / "ids.py"
    script.write_text(
        "import sys\nsys.path.insert(0, sys.argv[3])\nfrom test_non_utf8_names import ids_pipeline\n"
        "from pathlib import Path\nids_pipeline(Path(sys.argv[1]), Path(sys.argv[2])).run()\n"
    )
    plan = subprocess.run(
        [*cli, "plan", str(script), "--shards", "2", "--", str(data), str(tmp_path / "p"), str(Path(__file__).parent)],
        env={**env, "PYTHONPATH": f"{REPO / 'src'}:{REPO / 'tests'}"},
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr
    assert "3 source tasks over 2 shards" in plan.stdout


def test_a_warc_file_whose_name_is_not_utf8_is_read_whole_and_in_pieces(tmp_path: Path) -> None:
    pytest.importorskip("fastwarc")
    from curator_slurm.samples import web as web_sample
    from curator_slurm.stages import WarcReader

    pages = tmp_path / "pages"
    pages.mkdir()
    for i in range(30):
        (pages / f"p{i}.html").write_text(f"<html><body><p>page {i} " + "text " * 200 + "</p></body></html>")
    data = tmp_path / "in"
    data.mkdir()
    name = os.fsdecode(b"crawl-\xff.warc.gz")
    web_sample.write_warc(str(data / name), [(str(pages / f"p{i}.html"), f"https://x.example/{i}") for i in range(30)])
    for options in ({}, {"blocksize": 4000, "split_files": True}):
        out = tmp_path / f"out{len(options)}"
        pipeline = Pipeline("warc").add_stage(WarcReader(data, **options)).add_stage(AddId("doc_id"))
        pipeline.add_stage(ParquetWriter(out)).run(LocalExecutor(workers=1))
        parts = sorted(out.glob("*.parquet"))
        assert (len(parts) > 1) == bool(options)  # split: several source tasks of one file
        got = pa.concat_tables(pq.read_table(p) for p in parts)
        assert sorted(got.column("url").to_pylist()) == sorted(f"https://x.example/{i}" for i in range(30))
        file_hash = xxh(b"crawl-\xff.warc.gz")
        assert sorted(got.column("doc_id").to_pylist()) == sorted(f"{file_hash}_{i}" for i in range(30))

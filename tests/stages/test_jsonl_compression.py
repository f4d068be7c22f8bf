"""Compressed JSONL out (issue 36.3): ``JsonlWriter(compression="gzip" | "zstd")`` writes ``.jsonl.gz`` /
``.jsonl.zst`` files that every reader reads back, the same bytes in every run, worker count and shard, sizes
recorded and verified as for any output; NaN/inf floats become null, columns of bytes are refused."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.errors import OutputError
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.stages import JsonlReader, JsonlWriter, ScoreFilter, WordCountFilter
from curator_slurm.stages.io.jsonl import read_jsonl
from curator_slurm.tasks import DocumentBatch
from curator_slurm.workflows.chain import PhaseOutputsReader
from curator_slurm.workflows.workflow import Phase, Workflow
from support.docfiles import output_rows, run, write_jsonl
from support.helpers import clean_env, kill_when_recorded

ENDINGS = {"gzip": ".jsonl.gz", "zstd": ".jsonl.zst"}
CLI = [sys.executable, "-m", "curator_slurm.cli"]


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.jsonl*"))}


def write_batch(out: Path, table: pa.Table, compression: str | None) -> Path:
    writer = JsonlWriter(out, compression=compression)
    writer.setup()
    batch = DocumentBatch(task_id="t", dataset_name="d", data=table, source_id="src")
    writer.process(batch)
    (result,) = writer.end_source(batch, failed=False)
    (path,) = result.data
    assert result.metadata["sizes"] == [Path(path).stat().st_size], "the size reported is the file's"
    return Path(path)


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_compressed_output_reads_back_through_the_reader_and_is_reproducible(
    corpus: Path, tmp_path: Path, compression: str
) -> None:
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    run(Pipeline("p").add_stage(JsonlReader(corpus)).add_stage(JsonlWriter(plain)))
    run(Pipeline("p").add_stage(JsonlReader(corpus)).add_stage(JsonlWriter(packed, compression=compression)))
    names = sorted(files(packed))
    assert names and all(n.endswith(ENDINGS[compression]) for n in names)
    assert [n.removesuffix(ENDINGS[compression]) for n in names] == [n.removesuffix(".jsonl") for n in files(plain)]
    assert sum(map(len, files(packed).values())) < sum(map(len, files(plain).values())) / 2, "it compresses"
    # Decompressed, each file holds exactly the bytes the uncompressed writer wrote.
    for name, data in files(packed).items():
        stem = name.removesuffix(ENDINGS[compression])
        with pa.CompressedInputStream(pa.BufferReader(data), compression) as stream:
            assert stream.read() == files(plain)[stem + ".jsonl"]
    if compression == "gzip":
        header = next(iter(files(packed).values()))[:10]
        assert header[3] == 0 and header[4:8] == b"\0\0\0\0", "no file name and no time in the gzip header"
    else:
        frame = next(iter(files(packed).values()))
        assert frame[:4] == b"\x28\xb5\x2f\xfd" and frame[4] & 0xC0 == 0, "no content size in the zstd frame"
    # Read back with the reader (whole files, and with split_files: compressed files stay whole).
    again = tmp_path / "again"
    reader = JsonlReader(packed, blocksize="4KiB", split_files=True, file_path_field=None)
    run(Pipeline("q").add_stage(reader).add_stage(JsonlWriter(again)))
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(output_rows(again), key=key) == sorted(output_rows(plain), key=key)
    # Another worker count writes the same bytes.
    two = tmp_path / "two"
    pipeline = Pipeline("p").add_stage(JsonlReader(corpus)).add_stage(JsonlWriter(two, compression=compression))
    pipeline.run(LocalExecutor(workers=2, retry_backoff=0), shard=ShardSpec.single())
    assert files(two) == files(packed)


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_the_bytes_do_not_depend_on_how_the_batch_is_chunked(tmp_path: Path, compression: str) -> None:
    texts = [f"document {i} " + "word " * (i % 97) for i in range(20_000)]
    whole = pa.table({"text": texts})
    chunked = pa.Table.from_batches(whole.to_batches(max_chunksize=777))
    a = write_batch(tmp_path / "a", whole, compression).read_bytes()
    b = write_batch(tmp_path / "b", chunked, compression).read_bytes()
    assert a == b


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_a_later_phase_reads_the_compressed_output_of_the_phase_before(tmp_path: Path, compression: str) -> None:
    src = tmp_path / "in"
    write_jsonl(src / "a.jsonl", [{"id": i, "text": "word " * (i % 9)} for i in range(40)])
    write_jsonl(src / "sub" / "b.jsonl", [{"id": 100 + i, "text": "wörd " * 8} for i in range(5)])
    work, out = tmp_path / "work", tmp_path / "out"
    base = (
        Pipeline("base")
        .add_stage(JsonlReader(src))
        .add_stage(ScoreFilter(WordCountFilter(min_words=4)))
        .add_stage(JsonlWriter(work / "base", compression=compression))
    )
    final = Pipeline("final").add_stage(PhaseOutputsReader(base, work / ".curator-run" / "base", work / "base"))
    final.add_stage(JsonlWriter(out, compression=compression))
    Workflow("w", work, [Phase("base", base), Phase("final", final)]).run(LocalExecutor(workers=1))
    assert all(n.endswith(ENDINGS[compression]) for n in files(work / "base"))
    rows = output_rows(out)
    expected = [i for i in range(40) if i % 9 >= 4] + [100 + i for i in range(5)]
    assert sorted(r["id"] for r in rows) == expected
    assert {r["id"]: r["file_path"] for r in rows} == {i: "a.jsonl" if i < 100 else "sub/b.jsonl" for i in expected}


SCRIPT = textwrap.dedent(
    """
    import sys
    from curator_slurm import LocalExecutor, Pipeline
    from curator_slurm.stages import JsonlReader, JsonlWriter

    if __name__ == "__main__":
        src, out, compression = sys.argv[1:]
        pipeline = Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(out, compression=compression))
        pipeline.run(LocalExecutor(workers=1))
    """
)


def status(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "status", str(run_dir), *args], env=clean_env(), capture_output=True, text=True,
                          timeout=120)  # fmt: skip


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_killed_then_resumed_and_a_deleted_file_verified_and_restored(
    corpus: Path, tmp_path: Path, compression: str
) -> None:
    script = tmp_path / "write.py"
    script.write_text(SCRIPT)
    ref, out = tmp_path / "ref", tmp_path / "out"
    cmd = [sys.executable, str(script), str(corpus)]
    subprocess.run([*cmd, str(ref), compression], env=clean_env(), check=True, capture_output=True)
    kill_when_recorded([*cmd, str(out), compression], out / DEFAULT_RUN_DIR_NAME / "ledger", timeout=120, window=1)
    subprocess.run([*cmd, str(out), compression], env=clean_env(), check=True, capture_output=True)
    assert files(out) == files(ref), "killed and resumed: the same files, the same bytes"
    run_dir = out / DEFAULT_RUN_DIR_NAME
    assert status(run_dir, "--verify").returncode == 0
    victim = sorted(out.glob("*" + ENDINGS[compression]))[2]
    victim.unlink()
    proc = status(run_dir, "--verify")
    assert proc.returncode == 1 and f"{victim}: missing" in proc.stdout, proc.stdout
    subprocess.run([*cmd, str(out), compression], env=clean_env(), check=True, capture_output=True)
    assert files(out) == files(ref), "the re-run wrote the lost file again, byte for byte"
    assert status(run_dir, "--verify").returncode == 0


# --- what JSON cannot hold -----------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "gzip", "zstd"])
def test_nan_and_infinity_are_written_as_null(tmp_path: Path, compression: str | None) -> None:
    table = pa.table(
        {
            "text": ["a", "b", "c"],
            "score": [1.5, math.nan, -math.inf],
            "meta": [{"x": math.inf, "y": [2.0, math.nan]}, {"x": 0.25, "y": []}, {"x": None, "y": [1.0]}],
        }
    )
    path = write_batch(tmp_path, table, compression)
    rows = read_jsonl(str(path)).to_pylist()
    assert rows == [
        {"text": "a", "score": 1.5, "meta": {"x": None, "y": [2.0, None]}},
        {"text": "b", "score": None, "meta": {"x": 0.25, "y": []}},
        {"text": "c", "score": None, "meta": {"x": None, "y": [1.0]}},
    ]
    raw = path.read_bytes()
    if compression is not None:
        raw = pa.CompressedInputStream(pa.BufferReader(raw), compression).read()
    assert b"NaN" not in raw and b"Infinity" not in raw


@pytest.mark.parametrize("column", [pa.array([b"\xff", b"x"]), pa.array([{"raw": b"x"}, {"raw": None}])])
def test_a_column_of_bytes_is_refused_naming_it(tmp_path: Path, column: pa.Array) -> None:
    table = pa.table({"text": ["a", "b"], "payload": column})
    with pytest.raises(OutputError, match=r"\['payload'\] hold bytes.*decode them to text.*fields=.*Parquet"):
        write_batch(tmp_path / "out", table, None)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir()), "nothing written"


def test_an_unknown_compression_is_refused() -> None:
    with pytest.raises(ValueError, match=r"compression='bz2'.*'gzip'.*'zstd'"):
        JsonlWriter("/tmp/x", compression="bz2")


# --- any documents ----------------------------------------------------------------------------------------

metadata = st.fixed_dictionaries(
    {"lang": st.text(max_size=5), "score": st.floats(allow_nan=True, allow_infinity=True)},
    optional={"tags": st.lists(st.text(max_size=8), max_size=4), "n": st.integers(0, 10**9)},
)
documents = st.lists(st.fixed_dictionaries({"text": st.text(max_size=200), "meta": metadata}), min_size=1, max_size=30)


def _nulled(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nulled(v) for k, v in value.items()}
    return value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=documents, compression=st.sampled_from(["gzip", "zstd"]))
def test_any_documents_written_compressed_read_back_equal(
    tmp_path_factory: pytest.TempPathFactory, docs: list[dict[str, Any]], compression: str
) -> None:
    table = pa.Table.from_pylist(docs)
    path = write_batch(tmp_path_factory.mktemp("c"), table, compression)
    back = read_jsonl(str(path)).to_pylist()
    expected = [_nulled(d) for d in table.to_pylist()]
    assert back == expected

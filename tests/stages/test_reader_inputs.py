"""Every input file under a reader's path is read or refused by name (issue #24 items 2, 8, 9): every spelling
and compression of JSONL, symlinked directories (cycles reported), skipped names logged, long lines, and
clear, unretried errors for truncated streams, repeated keys, FIFOs, dangling links and read-only outputs."""

from __future__ import annotations

import bz2
import gzip
import json
import logging
import lzma
import os
import stat
from pathlib import Path

import pyarrow as pa
import pytest

from curator_slurm import InputError, Pipeline, PipelineFailedError
from curator_slurm.errors import OutputError
from curator_slurm.stages import JsonlReader, JsonlWriter
from support.docfiles import output_rows, run
from support.helpers import logged


def _lines(tag: str, n: int = 5) -> bytes:
    return b"".join(json.dumps({"id": f"{tag}-{i}", "text": f"text {tag} {i}"}).encode() + b"\n" for i in range(n))


def _compress(data: bytes, codec: str) -> bytes:
    if codec == "gzip":
        return gzip.compress(data)
    if codec == "bz2":
        return bz2.compress(data)
    if codec == "xz":
        return lzma.compress(data)
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, codec) as out:
        out.write(data)
    return sink.getvalue().to_pybytes()


#: The spellings of issue #24 item 2 (5 of 25 documents were read) and a few more users write.
SPELLINGS = {
    "a.jsonl": None,
    "b.jsonl.bz2": "bz2",
    "c.jsonl.xz": "xz",
    "d.jsonl.zstd": "zstd",
    "e.json.zst": "zstd",
    "f.jsonl.lz4": "lz4",
    "g.ndjson": None,
    "h.JSONL": None,
    "i.jsonl.GZ": "gzip",
    "j.NDJSON.gz": "gzip",
    "k.json.bz2": "bz2",
}


def test_every_jsonl_spelling_and_compression_is_read(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for name, codec in SPELLINGS.items():
        data = _lines(name)
        (src / name).write_bytes(_compress(data, codec) if codec else data)
    run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(tmp_path / "out")))
    ids = sorted(r["id"] for r in output_rows(tmp_path / "out"))
    assert ids == sorted(f"{name}-{i}" for name in SPELLINGS for i in range(5))


def test_files_not_taken_are_named_in_one_log_line(tmp_path: Path) -> None:
    """A file the reader does not take is not lost in silence: one warning names it and the option that
    takes it; hidden files (writers' temporaries) stay out, and ``file_extensions`` globs take the rest."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_bytes(_lines("a"))
    (src / "notes.txt").write_text("not json\n")
    (src / "b.jsonl.bak").write_bytes(_lines("b"))
    (src / ".a.jsonl.tmp-1-deadbeef").write_bytes(b'{"half": ')
    with logged(logging.WARNING) as messages:
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(tmp_path / "out")))
    skipped = [m for m in messages if m.startswith("skipped 2 file(s) not ending in .jsonl")]
    assert len(skipped) == 1, messages
    assert "b.jsonl.bak, notes.txt" in skipped[0] and "file_extensions" in skipped[0]
    assert sorted(r["id"] for r in output_rows(tmp_path / "out")) == [f"a-{i}" for i in range(5)]

    reader = JsonlReader(src, file_extensions=["*.jsonl*"])
    run(Pipeline("p").add_stage(reader).add_stage(JsonlWriter(tmp_path / "out2")))
    assert len(output_rows(tmp_path / "out2")) == 10  # a.jsonl and b.jsonl.bak; never the hidden temporary


def test_symlinked_directories_are_followed_and_a_cycle_is_reported(tmp_path: Path) -> None:
    src, elsewhere = tmp_path / "in", tmp_path / "elsewhere"
    (src / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    (src / "sub" / "a.jsonl").write_bytes(_lines("a"))
    (elsewhere / "b.jsonl").write_bytes(_lines("b"))
    (src / "linked").symlink_to(elsewhere, target_is_directory=True)
    (src / "sub" / "loop").symlink_to(src, target_is_directory=True)  # a cycle back to the root
    with logged(logging.WARNING) as messages:
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(tmp_path / "out")))
    ids = sorted(r["id"] for r in output_rows(tmp_path / "out"))
    assert ids == sorted([f"a-{i}" for i in range(5)] + [f"b-{i}" for i in range(5)])  # each file once
    assert any(f"{src / 'sub' / 'loop'}: already listed as {src}" in m for m in messages), messages


def test_a_dangling_symlink_or_a_fifo_is_refused_by_name(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_bytes(_lines("a"))
    (src / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(InputError, match=r"gone\.jsonl: a symbolic link to .*nowhere\.jsonl'?, which does not exist"):
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(tmp_path / "out")))
    (src / "gone.jsonl").unlink()
    os.mkfifo(src / "pipe.jsonl")
    with pytest.raises(InputError, match=r"pipe\.jsonl: a FIFO \(named pipe\), not a regular file"):
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(tmp_path / "out")))
    with pytest.raises(InputError, match=r"pipe\.jsonl: a FIFO"):  # named on its own, too
        run(Pipeline("p").add_stage(JsonlReader(src / "pipe.jsonl")).add_stage(JsonlWriter(tmp_path / "out")))


def test_truncated_gzip_names_the_file_and_is_not_retried(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    whole = gzip.compress(_lines("t", 2000))
    (src / "t.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(PipelineFailedError) as info:
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(tmp_path / "out")))
    (failed,) = info.value.result.failed
    assert f"{src / 't.jsonl.gz'}: the gzip stream is truncated or corrupt" in failed.error
    assert failed.attempts == 1


def test_a_repeated_key_is_reported_at_its_line(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "d.jsonl").write_text('{"a": 1, "text": "x"}\n{"a": 2, "a": 3, "text": "y"}\n')
    with pytest.raises(PipelineFailedError) as info:
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(tmp_path / "out")))
    (failed,) = info.value.result.failed
    assert f"{src / 'd.jsonl'}:2: field 'a' appears twice in one record" in failed.error
    assert failed.attempts == 1


def test_a_50_mb_line_is_read_with_the_rest_of_its_file(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    long = "w" * (50 << 20)
    with open(src / "long.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps({"id": "short-0", "text": "a"}) + "\n")
        f.write(json.dumps({"id": "long", "text": long}) + "\n")
        f.write(json.dumps({"id": "short-1", "text": "b"}) + "\n")
    run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(tmp_path / "out")))
    rows = {r["id"]: r["text"] for r in output_rows(tmp_path / "out")}
    assert sorted(rows) == ["long", "short-0", "short-1"]
    assert rows["long"] == long


def test_a_line_over_the_limit_fails_its_task_naming_file_line_and_limit(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "ok.jsonl").write_bytes(_lines("ok"))
    with open(src / "long.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps({"id": "s", "text": "a"}) + "\n" * 2)  # a blank line: line numbers count it
        f.write(json.dumps({"id": "l", "text": "w" * (3 << 20)}) + "\n")
    reader = JsonlReader(src, max_line_bytes="1MiB")
    with pytest.raises(PipelineFailedError) as info:
        run(Pipeline("p").add_stage(reader).add_stage(JsonlWriter(tmp_path / "out")))
    (failed,) = info.value.result.failed
    assert f"{src / 'long.jsonl'}:3: a line of " in failed.error
    assert "max_line_bytes=1048576" in failed.error and failed.attempts == 1
    assert sorted(r["id"] for r in output_rows(tmp_path / "out")) == [f"ok-{i}" for i in range(5)]


def test_a_file_in_the_way_of_the_output_is_a_clear_error(tmp_path: Path) -> None:
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    (src / "a.jsonl").write_bytes(_lines("a"))
    out.write_text("a file, not a directory\n")
    with pytest.raises(OutputError, match=f"^{out}: a file is in the way of the directory {out}/"):
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(out)))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_output_is_a_clear_error(tmp_path: Path) -> None:  # pragma: no cover - CI runs as root
    src, out = tmp_path / "in", tmp_path / "ro"
    src.mkdir()
    (src / "a.jsonl").write_bytes(_lines("a"))
    out.mkdir()
    out.chmod(stat.S_IRUSR | stat.S_IXUSR)
    with pytest.raises((OutputError, PipelineFailedError), match="cannot write there"):
        run(Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(out)))

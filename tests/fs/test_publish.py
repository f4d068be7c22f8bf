"""Atomic publish and dead writers' temporary files (issue #24 item 9): a writer killed with SIGKILL leaves a
hidden temporary file whose name says who wrote it (host, pid, start time, boot); the next run of any executor
removes those of dead writers on this host and leaves (and reports) the others."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from curator_slurm import Pipeline, ShardSpec, fs
from curator_slurm.stages import JsonlReader, JsonlWriter
from support.docfiles import output_rows
from support.executors import ExecutorFactory
from support.helpers import clean_env, logged

_WRITER = textwrap.dedent(
    """
    import sys, time
    from curator_slurm import fs

    def write(f):
        f.write(b'{"text": "half a rec')
        f.flush()
        print("writing", flush=True)
        time.sleep(600)

    fs.atomic_write(sys.argv[1], write)
    """
)


def _killed_mid_write(final: Path) -> str:
    """The temporary name a writer process left in ``final``'s directory when it was killed with SIGKILL."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(final)], stdout=subprocess.PIPE, env=clean_env(), text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (left,) = [p.name for p in final.parent.iterdir() if p.name.startswith(f".{final.name}{fs.TMP_MARK}")]
    return left


def test_temporary_names_say_host_pid_and_start(tmp_path: Path) -> None:
    left = _killed_mid_write(tmp_path / "x.jsonl")
    host = socket.gethostname()
    assert left.endswith(f"@{host}") and left.startswith(".x.jsonl.tmp-")


def test_a_resume_removes_dead_writers_temporaries_and_leaves_others(
    tmp_path: Path, executor_factory: ExecutorFactory
) -> None:
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    (src / "a.jsonl").write_text("".join(json.dumps({"text": f"t {i}"}) + "\n" for i in range(5)))
    dead = _killed_mid_write(out / "a-output.jsonl")
    host = fs.temp_name("x").rsplit("@", 1)[1]
    me = fs.temp_name("b.jsonl")  # a live writer on this host: this process
    other = ".c.jsonl.tmp-4242-0badcafe-12345-0000abcd@another-host.example"  # maybe alive over there
    rebooted = f".d.jsonl.tmp-{os.getpid()}-0badcafe-1-00000000@{host}"  # this pid, but from an earlier boot
    for name in (me, other, rebooted):
        (out / name).write_bytes(b"partial")
    with logged() as messages:
        pipeline = Pipeline("p").add_stage(JsonlReader(src)).add_stage(JsonlWriter(out))
        pipeline.run(executor_factory(workers=1, retry_backoff=0), shard=ShardSpec.single())
    left = sorted(p.name for p in out.iterdir() if p.name.startswith("."))
    assert dead not in left and rebooted not in left
    assert me in left and other in left
    summary = [m for m in messages if "removed 2 temporary file(s) of dead writers" in m]
    assert len(summary) == 1, messages
    assert "left 1 of writers on other hosts or of unknown writers (remove them by hand once no run" in summary[0]
    assert summary[0].count(other) == 1
    assert "left 1 of live writers" in summary[0]
    assert len(output_rows(out)) == 5


def test_an_array_task_removes_only_what_dead_writers_left(tmp_path: Path) -> None:
    """A shard of a (simulated) array, started afresh after a node lost a writer, cleans its output
    directory like the unsharded run does."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    for i in range(4):
        (src / f"{i}.jsonl").write_text(json.dumps({"text": f"t {i}"}) + "\n")
    out.mkdir()
    dead = _killed_mid_write(out / "somebody.jsonl")
    env = clean_env({"CURATOR_SHARD_INDEX": "1", "CURATOR_NUM_SHARDS": "2"})
    script = (
        "from curator_slurm import Pipeline, LocalExecutor\n"
        "from curator_slurm.stages import JsonlReader, JsonlWriter\n"
        f"Pipeline('p').add_stage(JsonlReader({str(src)!r})).add_stage(JsonlWriter({str(out)!r}))"
        ".run(LocalExecutor(workers=2))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "removed 1 temporary file(s) of dead writers" in proc.stderr
    assert not (out / dead).exists()


@pytest.mark.parametrize("when", ["write", "rename"])
def test_a_failed_publish_leaves_no_temporary(tmp_path: Path, when: str, monkeypatch: pytest.MonkeyPatch) -> None:
    final = tmp_path / "f.bin"

    def write(f: object) -> None:
        f.write(b"some")  # type: ignore[attr-defined]
        if when == "write":
            raise RuntimeError("the stage broke mid-write")

    if when == "rename":
        monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(5, "I/O error")))
    with pytest.raises((RuntimeError, OSError)):
        fs.atomic_write(str(final), write)
    assert list(tmp_path.iterdir()) == []

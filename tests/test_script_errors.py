"""How a plain pipeline script (no try/except of its own) ends on a CuratorError: one line, ``<script>:
<error class>: <message>``, exit status 1, no traceback; a changed threshold refused by the run directory is
the case users meet. Every other exception still shows its traceback, a script's own excepthook is kept, and
`curator-slurm local` says why each shard failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import clean_env

SCRIPT = """
import sys
from curator_slurm import Pipeline
from curator_slurm.stages import JsonlReader, ParquetWriter, ScoreFilter, WordCountFilter

pipeline = (
    Pipeline("curate")
    .add_stage(JsonlReader(sys.argv[1]))
    .add_stage(ScoreFilter(WordCountFilter(min_words=int(sys.argv[3]))))
    .add_stage(ParquetWriter(sys.argv[2]))
)
if __name__ == "__main__":
    {before}
    print(pipeline.run().summary())
    {after}
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    root.mkdir()
    for f in range(2):
        (root / f"{f}.jsonl").write_text("".join(json.dumps({"text": "word " * (40 + i)}) + "\n" for i in range(20)))
    return root


def script(tmp_path: Path, before: str = "pass", after: str = "pass") -> Path:
    path = tmp_path / "thresholds.py"
    path.write_text(SCRIPT.format(before=before, after=after))
    return path


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *map(str, args)], env=clean_env(), capture_output=True, text=True)


def test_a_changed_threshold_ends_the_script_with_its_message_and_no_traceback(data: Path, tmp_path: Path) -> None:
    path, out = script(tmp_path), tmp_path / "out"
    assert run(path, data, out, 50).returncode == 0
    changed = run(path, data, out, 60)
    assert changed.returncode == 1
    assert "Traceback" not in changed.stderr
    last = changed.stderr.strip().splitlines()[-1]
    assert last.startswith(f"thresholds.py: RunDirError: {out}/.curator-run belongs to another pipeline")
    assert "min_words: 50 then, 60 now" in last and "Use another run directory" in last
    assert changed.stdout == ""  # nothing ran


def test_other_exceptions_keep_their_traceback_and_a_scripts_own_hook_is_kept(data: Path, tmp_path: Path) -> None:
    bug = run(script(tmp_path, after="raise ValueError('a bug in the script')"), data, tmp_path / "a", 50)
    assert bug.returncode == 1
    assert "Traceback (most recent call last)" in bug.stderr and "ValueError: a bug in the script" in bug.stderr
    own = "sys.excepthook = lambda kind, error, tb: print('own hook:', error, file=sys.stderr)"
    path = script(tmp_path, before=own)
    assert run(path, data, tmp_path / "b", 50).returncode == 0
    changed = run(path, data, tmp_path / "b", 60)
    assert changed.returncode == 1
    assert changed.stderr.strip().splitlines()[-1].startswith("own hook: ")


def test_local_says_why_each_shard_failed(data: Path, tmp_path: Path) -> None:
    path, out = script(tmp_path), tmp_path / "out"
    assert run(path, data, out, 50).returncode == 0
    local = run("-m", "curator_slurm.cli", "local", path, "--shards", "2", "--", data, out, 70)
    assert local.returncode != 0
    for i in range(2):
        line = next(x for x in local.stdout.splitlines() if x.startswith(f"shard {i}/2: "))
        prefix = f"shard {i}/2: FAILED (exit 1): thresholds.py: RunDirError: {out}/.curator-run belongs to another"
        assert line.startswith(prefix)
        assert "min_words: 50 then, 70 now" in line

"""examples/curate.py as a user runs it, on bad input: a one-line message naming the path or the file and
line, the right exit code, and the good partitions still written."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.docfiles import leftovers, output_files
from support.helpers import run_example


def test_cli_reports_missing_input_without_traceback(tmp_path: Path) -> None:
    """The example job, given a missing input directory, exits non-zero with a one-line message naming it."""
    missing = tmp_path / "no-such-dir"
    proc = run_example(missing, tmp_path / "out", "--workers", "1", check=False)
    assert proc.returncode == 2
    assert f"curate: {missing}: no such file or directory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_reports_bad_line_and_writes_good_partitions(corpus: Path, tmp_path: Path) -> None:
    """The example job, run as a process on a corpus with one broken line, exits 1 with file:line on
    stderr and still writes the other partitions."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    for p in sorted(corpus.glob("*.jsonl"))[:2]:
        shutil.copy(p, src / p.name)
    lines = (corpus / "part-00002.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[6] = lines[6][: len(lines[6]) // 2] + "\n"
    (src / "part-00002.jsonl").write_text("".join(lines), encoding="utf-8")

    proc = run_example(src, out, "--workers", "1", check=False)
    assert proc.returncode == 1
    assert f"{src / 'part-00002.jsonl'}:7: malformed JSON" in proc.stderr
    assert "1 of 3 source tasks failed" in proc.stderr
    assert [p.suffix for p in output_files(out)] == [".parquet"] * 2
    assert leftovers(out) == []

"""An output that cannot be made (a name longer than the filesystem allows, a file where the directory
belongs) is an OutputError naming it, the limit or the file, and the fix, before any work and before any run
directory is claimed: for a pipeline (its run directory inside the output or elsewhere) and an exclusion
writer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.errors import OutputError
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetWriter
from curator_slurm.stages.datatrove import GopherQualityFilter

LONG = "n" * 256  # one name over the 255 bytes of ext4, xfs, btrfs and tmpfs


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    root.mkdir()
    (root / "a.jsonl").write_text("".join(json.dumps({"text": f"document {i} " * 60}) + "\n" for i in range(5)))
    return root


#: What runs, given the input, the output and a scratch directory: each writes into the output.
RUNS: dict[str, Callable[[Path, Path, Path], Any]] = {
    "pipeline": lambda d, o, t: Pipeline("p").add_stage(JsonlReader(d)).add_stage(ParquetWriter(o)),
    "pipeline, run directory elsewhere": lambda d, o, t: (
        Pipeline("p").add_stage(JsonlReader(d)).add_stage(ParquetWriter(o)),
        t / "runs",
    ),
    "exclusion writer": lambda d, o, t: (
        Pipeline("p")
        .add_stage(JsonlReader(d))
        .add_stage(GopherQualityFilter(exclusion_writer=JsonlWriter(o)))
        .add_stage(ParquetWriter(t / "kept")),
    ),
}


def _run(what: Any) -> None:
    if isinstance(what, tuple):  # a pipeline and its run directory
        pipeline, *run_dir = what
        pipeline.run(LocalExecutor(workers=1), run_dir=run_dir[0] if run_dir else None)
    else:
        what.run(LocalExecutor(workers=1))


def _nothing_written(tmp_path: Path) -> None:
    made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert all(p.startswith(("in", "tokenizer.json", "blocker")) for p in made), made


@pytest.mark.parametrize("kind", list(RUNS))
def test_a_name_longer_than_the_filesystem_allows_is_refused_before_any_work(
    kind: str, data: Path, tmp_path: Path
) -> None:
    out = tmp_path / LONG / "out"
    what = RUNS[kind](data, out, tmp_path)
    with pytest.raises(OutputError, match=r"the name 'n{28}\.\.\.n{28}' \(256 bytes\) is longer than the 255 bytes"):
        _run(what)
    _nothing_written(tmp_path)


@pytest.mark.parametrize("kind", list(RUNS))
@pytest.mark.parametrize("where", ["the output", "a parent"])
def test_a_file_where_the_output_belongs_is_refused_before_any_work(
    kind: str, where: str, data: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    out = blocker if where == "the output" else blocker / "out"
    what = RUNS[kind](data, out, tmp_path)
    with pytest.raises(
        OutputError, match=rf"^{blocker}: (a file, not a directory|a file is in the way of the directory)"
    ):
        _run(what)
    assert blocker.read_text() == "a file\n"
    _nothing_written(tmp_path)

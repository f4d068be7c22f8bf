"""An output that cannot be made (a name longer than the filesystem allows, a file where the directory
belongs) is an OutputError naming it, the limit or the file, and the fix, before any work and before any run
directory is claimed: for a pipeline (its run directory inside the output or elsewhere), the exact and fuzzy
dedup workflows, the tokenization workflow, an exclusion writer, and the example scripts, which say it in one
line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.errors import OutputError
from curator_slurm.stages import JsonlReader, JsonlWriter, MegatronTokenizerWriter, ParquetWriter
from curator_slurm.stages.datatrove import GopherQualityFilter
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from curator_slurm.workflows.tokenization import MegatronTokenization
from support.helpers import REPO, clean_env
from support.megatron_files import EOT, train_tokenizer

LONG = "n" * 256  # one name over the 255 bytes of ext4, xfs, btrfs and tmpfs


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    root.mkdir()
    (root / "a.jsonl").write_text("".join(json.dumps({"text": f"document {i} " * 60}) + "\n" for i in range(5)))
    return root


def _tokenization(data: Path, out: Path, tmp: Path) -> MegatronTokenization:
    tokenizer = tmp / "tokenizer.json"
    if not tokenizer.exists():
        train_tokenizer(tokenizer, ["document text"] * 20, vocab_size=300)
    writer = MegatronTokenizerWriter(tmp / "tokens", tokenizer, eod_token=EOT)
    return MegatronTokenization(JsonlReader(data), writer, out)


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
    "exact dedup": lambda d, o, t: ExactDuplicates(JsonlReader(d), ParquetWriter(o)),
    "fuzzy dedup": lambda d, o, t: FuzzyDuplicates(JsonlReader(d), ParquetWriter(o)),
    "tokenization": _tokenization,
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


@pytest.mark.parametrize("script", ["dedup.py", "curate.py", "tokenize_corpus.py"])
def test_the_example_scripts_say_it_in_one_line(script: str, data: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    args = ["--input", str(data), "--output", str(blocker)]
    if script == "tokenize_corpus.py":
        train_tokenizer(tmp_path / "tokenizer.json", ["document text"] * 20, vocab_size=300)
        args += ["--tokenizer", str(tmp_path / "tokenizer.json"), "--eos-token", EOT]
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / script), *args], env=clean_env(), capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{blocker}: a file" in done.stderr.strip().splitlines()[-1]
    # `curator-slurm plan` (what `submit` runs first) refuses it too, before anything is submitted.
    plan = subprocess.run(
        [
            sys.executable,
            "-m",
            "curator_slurm.cli",
            "plan",
            str(REPO / "examples" / script),
            "--shards",
            "2",
            "--",
            *args,
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 2 and f"{blocker}: a file" in plan.stderr, plan.stderr

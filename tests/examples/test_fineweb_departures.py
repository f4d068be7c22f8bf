"""examples/fineweb.py says where a run departs from FineWeb's own steps: in its first lines, then again in
`curator-slurm status` and the report's data; a run with FineWeb's URL lists and a fastText model names neither."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.samples import web as web_sample
from curator_slurm.slurm.report import report_data
from support.helpers import REPO, clean_env
from support.lidmodels import train_model
from support.webfixtures import html_root

FINEWEB = REPO / "examples" / "fineweb.py"


def small_warc(tmp_path: Path) -> Path:
    root = html_root("python3.11-doc")
    pages = sorted((root / "tutorial").glob("*.html"))[:3]
    out = tmp_path / "warcs"
    out.mkdir()
    web_sample.write_warc(str(out / "a.warc.gz"), [(str(p), f"https://docs.example/{p.name}") for p in pages])
    return out


def recipe(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(FINEWEB), "--no-dedup", "--workers", "1", *args]
    return subprocess.run(cmd, env=clean_env(), check=True, capture_output=True, text=True)


def status_text(work: Path) -> str:
    cmd = [sys.executable, "-m", "curator_slurm.cli", "status", str(work)]
    return subprocess.run(cmd, env=clean_env(), capture_output=True, text=True).stdout


def test_a_run_without_block_lists_or_language_model_says_so_first_and_status_repeats_it(tmp_path: Path) -> None:
    data, out = small_warc(tmp_path), tmp_path / "out"
    done = recipe("--input", str(data), "--output", str(out))
    first = done.stderr.splitlines()[:6]
    assert any("WARNING" in line and "--url-blocklist" in line and "every URL" in line for line in first), first
    assert any("WARNING" in line and "CLD2" in line and "lid.176 at 0.65" in line for line in first), first
    assert any("WARNING" in line and "MinHash" in line for line in first), first
    work = out / ".curator-work" / ".curator-run"
    shown = status_text(work)
    head = shown.splitlines()[:6]
    assert any(line.startswith("warning:") and "--url-blocklist" in line for line in head), shown
    assert any(line.startswith("warning:") and "CLD2" in line for line in head), shown
    warnings = report_data(str(work))["warnings"]
    assert any("CLD2" in w for w in warnings) and any("--url-blocklist" in w for w in warnings)


def test_a_run_with_block_lists_and_a_fasttext_model_names_neither(tmp_path: Path) -> None:
    pytest.importorskip("fasttext")
    data, out = small_warc(tmp_path), tmp_path / "out"
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "domains").write_text("blocked.example\n", encoding="utf-8")
    pairs = (("en", "the cat sat on the mat"), ("fr", "le chat est assis sur le tapis"))
    lines = [f"__label__{lang} {words} {i}" for i in range(50) for lang, words in pairs]
    model = train_model(tmp_path / "lid.bin", lines)
    done = recipe("--input", str(data), "--output", str(out), "--url-blocklist", str(lists),
                  "--fasttext-model", str(model))  # fmt: skip
    warned = [line for line in done.stderr.splitlines() if "WARNING: not FineWeb's own step" in line]
    assert not any("URL" in w or "language filter" in w for w in warned), warned
    shown = status_text(out / ".curator-work" / ".curator-run")
    assert not any(line.startswith("warning:") and ("URL" in line or "CLD2" in line) for line in shown.splitlines())


def test_submit_carries_the_warnings_into_the_workflow_record(tmp_path: Path) -> None:
    """What `curator-slurm submit` records before any task ran (its plan, then ``workflow.json``) holds them."""
    import importlib.util

    from curator_slurm.slurm.options import SubmitOptions
    from curator_slurm.slurm.phases import save_submission
    from curator_slurm.workflows.workflow import workflow_warnings

    spec = importlib.util.spec_from_file_location("fineweb_recipe", FINEWEB)
    assert spec is not None and spec.loader is not None
    fineweb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fineweb)
    data = small_warc(tmp_path)
    args = fineweb.parse_args(["--input", str(data), "--output", str(tmp_path / "out"), "--no-url-filter"])
    plan = fineweb.build_workflow(args).plan()
    assert any("no URL filter" in w for w in plan["warnings"]) and any("CLD2" in w for w in plan["warnings"])
    root = tmp_path / "root"
    save_submission(str(root), SubmitOptions(script=str(FINEWEB)), {p["phase"]: 1 for p in plan["phases"]}, plan)
    assert workflow_warnings(str(root)) == plan["warnings"]

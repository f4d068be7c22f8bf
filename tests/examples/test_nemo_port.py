"""examples/nemo_port.py: a NeMo Curator 1.x script whose only changes are its import and executor lines runs, on
real WARC files (the Debian Handbook's pages, a third of them in both files), and gives NeMo's columns,
the filters' decisions, an exact deduplication equal to a brute-force one, and Megatron files of the
deduplicated documents."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from support.helpers import REPO, clean_env
from support.megatron_files import EOT, pairs, python_docs_text, sequences_of, train_tokenizer
from support.webfixtures import build_warc, html_root

SCRIPT = REPO / "examples" / "nemo_port.py"
#: What a changed line may be: NeMo's imports and its Ray client and executor set-up.
NEMO_EXECUTOR_LINES = (
    "ray_client = RayClient()",
    "ray_client.start()",
    "executor = XennaExecutor()",
    "ray_client.stop()",
)


def test_only_import_and_executor_lines_differ_from_nemo_code() -> None:
    """Each ``# NeMo:`` comment holds an original line; the lines it replaced are imports from this package or
    the executor; no other line of the script names this package."""
    lines = SCRIPT.read_text().splitlines()
    originals = [line.strip().removeprefix("# NeMo: ") for line in lines if line.strip().startswith("# NeMo: ")]
    assert originals, "the script says what it changed"
    for original in originals:
        assert original.startswith("from nemo_curator.") or original in NEMO_EXECUTOR_LINES, original
    tree = ast.parse(SCRIPT.read_text())
    ours = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module.startswith("curator")]
    assert {n.module for n in ours} == {"curator_slurm", "curator_slurm.nemo"}
    changed = {n.lineno for n in ours}
    for number, line in enumerate(lines, start=1):
        code = line.split("#")[0]
        if "curator_slurm" in code or "LocalExecutor" in code:
            assert number in changed or code.strip() == "executor = LocalExecutor()", (number, line)
            assert lines[number - 2].strip().startswith("# NeMo: "), f"line {number} changed without its original"
    nemo_imports = [o for o in originals if o.startswith("from nemo_curator.")]
    assert len(nemo_imports) == len(ours) + 1, "one import per NeMo import (RayClient's goes with the executor)"


@pytest.fixture(scope="module")
def ported_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = html_root("debian-handbook") / "en-US"
    pages = sorted(root.glob("*.html"))[:60]
    work = tmp_path_factory.mktemp("nemo-port")
    build_warc(work / "warcs" / "a.warc.gz", pages[:40], root)
    build_warc(work / "warcs" / "b.warc.gz", pages[20:60], root, first_number=40)
    model = work / "model"
    model.mkdir()
    train_tokenizer(model / "tokenizer.json", python_docs_text())
    (model / "tokenizer_config.json").write_text(json.dumps({"eos_token": EOT}))
    out = work / "out"
    command = [sys.executable, str(SCRIPT), "--warc-dir", str(work / "warcs"), "--output-dir", str(out),
               "--tokenizer", str(model)]  # fmt: skip
    subprocess.run(command, check=True, env=clean_env(), cwd=work, capture_output=True, text=True, timeout=900)
    return out


def _jsonl(directory: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(directory.glob("*.jsonl")) for line in p.read_text().splitlines()]


def test_extraction_gives_nemos_columns(ported_run: Path) -> None:
    extracted = _jsonl(ported_run / "extracted")
    assert extracted and all(
        list(r) == ["url", "warc_id", "source_id", "language", "text", "file_name"] for r in extracted
    )
    assert {r["source_id"] for r in extracted} == {"a.warc.gz", "b.warc.gz"}
    assert all(r["source_id"] == r["file_name"] and len(r["warc_id"]) == 36 for r in extracted)
    assert {r["language"] for r in extracted} >= {"ENGLISH"}


def test_filters_modifier_and_dedup_decide_as_written(ported_run: Path) -> None:
    extracted = _jsonl(ported_run / "extracted")
    filtered = _jsonl(ported_run / "filtered")
    assert 0 < len(filtered) < len(extracted)
    for r in filtered:
        assert r["language"] == "ENGLISH" and len(r["text"].split()) >= 50
        assert r["repeated_lines"] >= 0.7 and r["short_lines"] <= 0.6 and r["non_alpha_numeric"] <= 0.25
        assert all(line == " ".join(line.split()) for line in r["text"].split("\n")), "the modifier ran"
    # Exact dedup: the first of each text in (file, row) order survives, as a brute-force pass finds.
    seen: set[str] = set()
    expected = []
    for p in sorted((ported_run / "filtered").glob("*.jsonl")):
        for line in p.read_text().splitlines():
            record = json.loads(line)
            key = " ".join(record["text"].split())
            if key not in seen:
                seen.add(key)
                expected.append(record["warc_id"])
    tables = [pq.read_table(p) for p in (ported_run / "deduplicated").glob("*.parquet")]
    deduplicated = [i for t in tables for i in t["warc_id"].to_pylist()]
    assert sorted(deduplicated) == sorted(expected) and len(expected) < len(filtered)
    assert (ported_run / "exact_dedup" / "ExactDuplicateIds").is_dir()
    sequences = [s for prefix in pairs(ported_run / "tokens") for s in sequences_of(prefix)]
    assert len(sequences) == len(deduplicated), "one sequence per deduplicated document"

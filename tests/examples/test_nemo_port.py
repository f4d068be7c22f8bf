"""examples/nemo_port.py: a NeMo Curator 1.x script (nemo_original.py.txt) whose only changes are its import and
executor lines runs, on real WARC files (the Debian Handbook's pages, a third of them in both files), and gives
NeMo's columns, the filters' decisions, an exact deduplication equal to a brute-force one (its list in one file),
and Megatron files of the deduplicated documents."""

from __future__ import annotations

import ast
import difflib
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
#: The NeMo Curator script it was ported from, as a NeMo user has it (the imports checked against NeMo 1.x's code).
ORIGINAL = Path(__file__).parent / "nemo_original.py.txt"
#: What a changed line may be: NeMo's imports and its Ray client and executor set-up.
NEMO_EXECUTOR_LINES = (
    "ray_client = RayClient()",
    "ray_client.start()",
    "executor = XennaExecutor()",
    "ray_client.stop()",
)


def _changes(original: list[str], port: list[str]) -> tuple[list[str], list[str]]:
    """The lines of ``original`` that ``port`` replaced or removed, and the lines ``port`` has instead."""
    removed: list[str] = []
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=original, b=port, autojunk=False).get_opcodes():
        if tag != "equal":
            removed.extend(original[i1:i2])
            added.extend(port[j1:j2])
    return removed, added


def test_only_import_and_executor_lines_differ_from_the_nemo_original() -> None:
    """The script against the NeMo original it was ported from (kept beside this test): every line it removed is an
    import from NeMo Curator or NeMo's Ray client and executor set-up; every line it has instead is an import from
    this package, the executor, a comment or a blank line; each ``# NeMo:`` comment holds a line it removed."""
    original = ORIGINAL.read_text().splitlines()
    port = SCRIPT.read_text().splitlines()
    assert "curator_slurm" not in ORIGINAL.read_text() and "nemo_curator" not in "".join(
        line for line in port if not line.strip().startswith("#")
    )
    removed, added = _changes(original, port)
    assert removed, "the port changed something"
    for line in removed:
        assert line.strip().startswith("from nemo_curator.") or line.strip() in NEMO_EXECUTOR_LINES, line
    for line in added:
        code = line.strip()
        assert (
            not code
            or code.startswith("#")
            or code.startswith("from curator_slurm")
            or code == "executor = LocalExecutor()"
        ), line
    kept = [line for line in port if line.strip() and not line.strip().startswith("#")]
    assert len(kept) == len([line for line in original if line.strip()]) - len(removed) + len(
        [line for line in added if line.strip() and not line.strip().startswith("#")]
    )
    originals = [line.strip().removeprefix("# NeMo: ") for line in port if line.strip().startswith("# NeMo: ")]
    assert sorted(originals) == sorted(line.strip() for line in removed), "each change names the line it replaced"
    tree = ast.parse(SCRIPT.read_text())
    ours = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module.startswith("curator")]
    assert {n.module for n in ours} == {"curator_slurm", "curator_slurm.nemo"}
    nemo_tree = ast.parse(ORIGINAL.read_text())
    nemo_imports = [n for n in ast.walk(nemo_tree) if isinstance(n, ast.ImportFrom) and n.module.startswith("nemo")]
    names = {alias.name for n in nemo_imports for alias in n.names} - {"RayClient"}  # the executor's, gone with it
    assert names - {"XennaExecutor"} == {alias.name for n in ours for alias in n.names} - {"LocalExecutor"}


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
    listed = list((ported_run / "exact_dedup" / "ExactDuplicateIds").glob("*.parquet"))
    assert len(listed) == 1, "one input task (NeMo's blocksize): one partition, one file of duplicates"
    assert sum(pq.read_metadata(p).num_rows for p in listed) == len(filtered) - len(expected)
    sequences = [s for prefix in pairs(ported_run / "tokens") for s in sequences_of(prefix)]
    assert len(sequences) == len(deduplicated), "one sequence per deduplicated document"

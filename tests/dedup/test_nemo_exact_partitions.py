"""NeMo's ExactDeduplicationWorkflow lists the duplicates in as many files as its partitions (``total_nparts``,
by default a third of the input's tasks, at least one), not one per shuffle bucket; the list is the brute-force
one, each duplicate once, also after a re-run; the removal gives the input without them."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator_slurm.nemo import ExactDeduplicationWorkflow, TextDuplicatesRemovalWorkflow
from support.docfiles import output_rows, write_jsonl

FILES, ROWS = 12, 8


def corpus(root: Path) -> list[tuple[str, str]]:
    """``FILES`` JSONL files of ``ROWS`` documents, a third of them copies of earlier ones: (id, text) in
    (file, row) order."""
    docs = []
    for f in range(FILES):
        rows = []
        for r in range(ROWS):
            n = f * ROWS + r
            text = f"document {n % 13} of the corpus" if n % 3 == 0 else f"unique text {n}"
            rows.append({"id": f"d{n}", "text": text})
            docs.append((f"d{n}", text))
        write_jsonl(root / f"part-{f:02d}.jsonl", rows)
    return docs


def brute_force(docs: list[tuple[str, str]]) -> set[str]:
    seen: set[str] = set()
    duplicates = set()
    for doc_id, text in docs:
        if text in seen:
            duplicates.add(doc_id)
        seen.add(text)
    return duplicates


def listed(ids_dir: Path) -> tuple[int, list[tuple[str, int]]]:
    files = sorted(ids_dir.glob("*.parquet"))
    rows = [(r["path"], r["row"]) for f in files for r in pq.read_table(f).to_pylist()]
    return len(files), rows


def as_ids(rows: list[tuple[str, int]], docs: list[tuple[str, str]]) -> list[str]:
    return [docs[int(path.removeprefix("part-").removesuffix(".jsonl")) * ROWS + row][0] for path, row in rows]


@pytest.mark.parametrize(("total_nparts", "most_files"), [(None, 1), (4, 4)])
def test_duplicates_listed_in_as_many_files_as_partitions(
    tmp_path: Path, total_nparts: int | None, most_files: int
) -> None:
    docs = corpus(tmp_path / "in")
    expected = brute_force(docs)
    out = tmp_path / "dedup"
    workflow = ExactDeduplicationWorkflow(
        output_path=str(out), input_path=str(tmp_path / "in"), input_filetype="jsonl", total_nparts=total_nparts
    )
    assert workflow.total_nparts == (1 if total_nparts is None else total_nparts)
    workflow.run()
    count, rows = listed(out / "ExactDuplicateIds")
    assert 1 <= count <= most_files
    assert sorted(as_ids(rows, docs)) == sorted(expected), "each duplicate listed once"
    before = sorted(p.name for p in (out / "ExactDuplicateIds").glob("*.parquet"))
    ExactDeduplicationWorkflow(
        output_path=str(out), input_path=str(tmp_path / "in"), input_filetype="jsonl", total_nparts=total_nparts
    ).run()  # a re-run finds every task done: the same files, nothing listed twice
    assert sorted(p.name for p in (out / "ExactDuplicateIds").glob("*.parquet")) == before
    assert sorted(as_ids(listed(out / "ExactDuplicateIds")[1], docs)) == sorted(expected)
    TextDuplicatesRemovalWorkflow(
        input_path=str(tmp_path / "in"),
        ids_to_remove_path=str(out / "ExactDuplicateIds"),
        output_path=str(tmp_path / "kept"),
        input_filetype="jsonl",
        id_generator_path=str(out / "exact_id_generator.json"),
    ).run()
    kept = sorted(r["id"] for r in output_rows(tmp_path / "kept"))
    assert kept == sorted(i for i, _ in docs if i not in expected)


def test_default_partitions_follow_the_input_tasks(tmp_path: Path) -> None:
    """NeMo's default: a third of the input's tasks (here one file per task, 12 files -> 4)."""
    corpus(tmp_path / "in")
    workflow = ExactDeduplicationWorkflow(
        output_path=str(tmp_path / "dedup"), input_path=str(tmp_path / "in"), input_filetype="jsonl", input_blocksize=1
    )
    assert workflow.total_nparts == FILES // 3

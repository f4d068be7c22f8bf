"""File partitioning, the source stage of every reader: grouping by count and by size, split files as
source tasks, limits, what a directory listing skips, and ids that do not depend on order, process or seed."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from curator_slurm import FileGroupTask, Pipeline
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetWriter
from curator_slurm.tasks import content_id
from support.docfiles import (
    as_multiset,
    names,
    output_rows,
    partitions,
    read_jsonl_rows,
    run,
    write_jsonl,
    write_sized,
)
from support.helpers import clean_env, logged

# --- partitioning ---------------------------------------------------------------------------------


@pytest.fixture
def five_files(tmp_path: Path) -> list[Path]:
    """Five JSONL files of 510 bytes each: two fit in 1 KiB (1020 B) but not in 1 kB (1000 B)."""
    d = tmp_path / "sized"
    d.mkdir()
    return [write_sized(d / f"f{i}.jsonl", 510) for i in range(5)]


def test_each_file_is_its_own_partition_by_default(five_files: list[Path]) -> None:
    """Without files_per_partition or blocksize, every file is one partition, in sorted order."""
    assert names(partitions(five_files[0].parent)) == [[f"f{i}.jsonl"] for i in range(5)]


def test_files_per_partition_groups_sorted_files(five_files: list[Path]) -> None:
    """files_per_partition=2 makes groups of two sorted files, the last one shorter."""
    groups = partitions(five_files[0].parent, files_per_partition=2)
    assert names(groups) == [["f0.jsonl", "f1.jsonl"], ["f2.jsonl", "f3.jsonl"], ["f4.jsonl"]]
    assert [g.metadata["bytes"] for g in groups] == [1020, 1020, 510]
    assert all(os.path.isabs(p) for g in groups for p in g.data)


@pytest.mark.parametrize("blocksize", ["1KiB", "1 kib", 1024, "1.0KiB"])
def test_blocksize_in_kibibytes_packs_two_files(five_files: list[Path], blocksize: int | str) -> None:
    """blocksize 1 KiB (as a string with a binary unit or as an int) packs files greedily up to 1024 bytes."""
    groups = partitions(five_files[0].parent, blocksize=blocksize)
    assert names(groups) == [["f0.jsonl", "f1.jsonl"], ["f2.jsonl", "f3.jsonl"], ["f4.jsonl"]]


@pytest.mark.parametrize("blocksize", ["1KB", "1kb", 1000])
def test_blocksize_in_kilobytes_is_decimal(five_files: list[Path], blocksize: int | str) -> None:
    """'1KB' means 1000 bytes: two 510-byte files exceed it, so each file is alone."""
    assert names(partitions(five_files[0].parent, blocksize=blocksize)) == [[f"f{i}.jsonl"] for i in range(5)]


def test_file_bigger_than_blocksize_gets_its_own_partition(tmp_path: Path) -> None:
    """A file larger than the blocksize is never split or dropped: it is a partition by itself."""
    write_sized(tmp_path / "a.jsonl", 100)
    write_sized(tmp_path / "b.jsonl", 5000)
    write_sized(tmp_path / "c.jsonl", 100)
    write_sized(tmp_path / "d.jsonl", 100)
    assert names(partitions(tmp_path, blocksize="1KiB")) == [["a.jsonl"], ["b.jsonl"], ["c.jsonl", "d.jsonl"]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"blocksize": "1 parsec"}, r"blocksize='1 parsec' is not a size"),
        ({"blocksize": 0}, r"blocksize=0 must be positive"),
        ({"files_per_partition": 0}, r"files_per_partition=0 must be >= 1"),
        ({"files_per_partition": 2, "blocksize": "1MiB"}, r"not both"),
        ({"limit": 0}, r"limit=0 must be >= 1"),
    ],
)
def test_bad_partitioning_settings_are_refused(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    """Nonsense partitioning settings fail when the reader is made, with the offending value."""
    with pytest.raises(ValueError, match=message):
        JsonlReader(tmp_path, **kwargs)


def test_split_files_cuts_large_files_into_pieces_that_are_source_tasks(tmp_path: Path) -> None:
    """Files over blocksize become pieces of at most blocksize bytes, each with its own stable id and
    size; smaller files are grouped as before; a compressed file cannot be split and stays whole."""
    write_sized(tmp_path / "a.jsonl", 100)
    write_jsonl(tmp_path / "b.jsonl", [{"text": "y" * 40, "n": i} for i in range(100)])  # 5,000+ bytes
    write_sized(tmp_path / "c.jsonl", 100)
    write_sized(tmp_path / "d.jsonl", 100)
    (tmp_path / "e.jsonl.gz").write_bytes(gzip.compress(b"".join(b'{"text": "%d"}\n' % i for i in range(2000))))
    big = (tmp_path / "b.jsonl").stat().st_size
    gz = (tmp_path / "e.jsonl.gz").stat().st_size
    assert gz > 1024
    with logged(logging.WARNING) as messages:
        groups = partitions(tmp_path, blocksize="1KiB", split_files=True)
    pieces = [g for g in groups if "byte_range" in g.metadata]
    assert names(groups)[0] == ["a.jsonl"] and names(groups)[-2:] == [["c.jsonl", "d.jsonl"], ["e.jsonl.gz"]]
    assert names(pieces) == [["b.jsonl"]] * len(pieces) and len(pieces) == -(-big // 1024)
    ranges = [tuple(g.metadata["byte_range"]) for g in pieces]
    assert ranges[0][0] == 0 and ranges[-1][1] == big
    assert all(end == nxt for (_, end), (nxt, _) in pairwise(ranges)), "they tile the file"
    assert all(0 < g.metadata["bytes"] <= 1024 for g in pieces)
    ids = [g.task_id for g in groups]
    assert len(set(ids)) == len(ids) and ids == [
        g.task_id for g in partitions(tmp_path, blocksize=1024, split_files=True)
    ]
    assert content_id("b.jsonl") not in ids, "a piece never takes the whole file's id"
    assert len(messages) == 1 and "1 compressed file(s)" in messages[0]
    assert [g.metadata.get("byte_range") for g in partitions(tmp_path, blocksize="1KiB")] == [None] * 4


def test_limit_caps_the_number_of_partitions(corpus: Path, tmp_path: Path) -> None:
    """limit=N keeps the first N partitions (of the sorted files) and reads only those."""
    groups = partitions(corpus, files_per_partition=5, limit=2)
    assert names(groups) == [[f"part-{i:05d}.jsonl" for i in range(5)], [f"part-{i:05d}.jsonl" for i in range(5, 10)]]
    result = run(
        Pipeline("p").add_stage(JsonlReader(corpus, files_per_partition=5, limit=2)).add_stage(JsonlWriter(tmp_path))
    )
    assert len(result.output_files) == 2
    assert len(output_rows(tmp_path)) == 10 * 60


def test_partitions_of_a_pipeline_cover_every_input_row_once(corpus: Path, tmp_path: Path) -> None:
    """files_per_partition=5 over 12 files writes 3 files holding each input document exactly once."""
    result = run(
        Pipeline("p")
        .add_stage(JsonlReader(corpus, files_per_partition=5, file_path_field=None))
        .add_stage(ParquetWriter(tmp_path))
    )
    assert len(result.output_files) == 3
    expected = [row for p in sorted(corpus.glob("*.jsonl")) for row in read_jsonl_rows(p)]
    assert as_multiset(output_rows(tmp_path)) == as_multiset(expected)


def test_hidden_files_and_other_extensions_are_not_read(tmp_path: Path) -> None:
    """Directory listing skips hidden files (unfinished writes) and files without a reader extension."""
    write_jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    write_jsonl(tmp_path / ".a.jsonl.tmp-1-abc", [{"text": "partial"}])
    write_jsonl(tmp_path / ".hidden.jsonl", [{"text": "hidden"}])
    (tmp_path / "notes.txt").write_text("not data")
    write_jsonl(tmp_path / "sub" / "b.jsonl", [{"text": "y"}])
    assert names(partitions(tmp_path, file_extensions=[".jsonl"])) == [["a.jsonl"], ["b.jsonl"]]


# --- deterministic ids and names ------------------------------------------------------------------


def test_file_group_id_does_not_depend_on_path_order(corpus: Path) -> None:
    """A file group's id is a hash of its sorted absolute paths, whatever order they come in."""
    files = sorted(str(p) for p in corpus.glob("*.jsonl"))[:4]
    ids = {FileGroupTask.from_paths(order).task_id for order in (files, files[::-1], files[2:] + files[:2])}
    assert ids == {content_id(*files)}
    assert FileGroupTask.from_paths(files).data == files


def test_partition_ids_do_not_depend_on_listing_order(corpus: Path) -> None:
    """Listing the same files in any order, or as their directory, gives the same groups and ids."""
    files = sorted(str(p) for p in corpus.glob("*.jsonl"))
    expected = [(g.task_id, g.data) for g in partitions(corpus, files_per_partition=5)]
    for order in (files[::-1], files[5:] + files[:5]):
        assert [(g.task_id, g.data) for g in partitions(order, files_per_partition=5)] == expected


_PRINT_IDS = """
import json, sys
from curator_slurm.stages import FilePartitioningStage
from curator_slurm.tasks import EmptyTask
groups = FilePartitioningStage(sys.argv[1:], files_per_partition=5).process(EmptyTask())
print(json.dumps([g.task_id for g in groups]))
"""


def test_partition_ids_are_identical_across_processes_and_hash_seeds(corpus: Path) -> None:
    """Separate interpreters with different PYTHONHASHSEED, path orders and working directories (relative
    paths) compute the same partition ids as this process."""
    files = sorted(p.name for p in corpus.glob("*.jsonl"))
    expected = [g.task_id for g in partitions(corpus, files_per_partition=5)]
    assert len(set(expected)) == 3
    outputs = []
    for seed, order in (("0", files), ("1", files[::-1]), ("4242", files[3:] + files[:3])):
        proc = subprocess.run(
            [sys.executable, "-c", _PRINT_IDS, *order],
            cwd=corpus,
            env=clean_env({"PYTHONHASHSEED": seed}),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        outputs.append(json.loads(proc.stdout))
    assert outputs == [expected] * 3

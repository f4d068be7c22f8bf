"""merge_pairs on pairs written by hand from Megatron's documented layout (documents of several sequences
included), small chunks so that every section is streamed in pieces, and damaged inputs refused by name."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from curator_slurm.errors import InputError
from curator_slurm.stages.io import megatron_format
from curator_slurm.stages.io.megatron_format import merge_pairs
from support.megatron_files import read_megatron


def write_pair(prefix: Path, sequences: list[list[int]], doc_index: list[int], code: int = 8) -> None:
    """A pair in Megatron's layout, spelled out field by field (uint16 tokens for code 8)."""
    dtype = {8: "<u2", 4: "<i4"}[code]
    lengths = [len(s) for s in sequences]
    pointers = np.concatenate([[0], np.cumsum(lengths[:-1])]).astype(np.int64) * np.dtype(dtype).itemsize
    Path(f"{prefix}.bin").write_bytes(b"".join(np.asarray(s, dtype).tobytes() for s in sequences))
    Path(f"{prefix}.idx").write_bytes(
        b"MMIDIDX\x00\x00"
        + struct.pack("<QBQQ", 1, code, len(sequences), len(doc_index))
        + np.asarray(lengths, "<i4").tobytes()
        + pointers[: len(sequences)].astype("<i8").tobytes()
        + np.asarray(doc_index, "<i8").tobytes()
    )


def plain_write(path: str, fill: Any) -> None:
    with open(path, "wb") as f:
        fill(f)


def test_merge_concatenates_sequences_and_shifts_document_indices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(megatron_format, "CHUNK", 2)  # every section in pieces of 2 entries
    a = [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10], [11]]
    b = [[], [12, 13], [14]]
    write_pair(tmp_path / "a", a, [0, 2, 3, 5])  # documents of 2, 1 and 2 sequences
    write_pair(tmp_path / "b", b, [0, 1, 3])
    write_pair(tmp_path / "empty", [], [0])
    merge_pairs([str(tmp_path / n) for n in ("a", "empty", "b")], plain_write, str(tmp_path / "m"))
    got = read_megatron(tmp_path / "m")
    assert got["code"] == 8 and got["version"] == 1
    assert got["sequences"] == a + b
    assert got["document_index"] == [0, 2, 3, 5, 6, 8]


def test_damaged_or_mixed_pairs_are_refused_by_name(tmp_path: Path) -> None:
    write_pair(tmp_path / "a", [[1, 2], [3]], [0, 1, 2])
    write_pair(tmp_path / "wide", [[1, 2]], [0, 1], code=4)
    with pytest.raises(InputError, match="different dtypes"):
        merge_pairs([str(tmp_path / "a"), str(tmp_path / "wide")], plain_write, str(tmp_path / "m"))
    write_pair(tmp_path / "short", [[1, 2], [3]], [0, 1, 2])
    Path(tmp_path / "short.bin").write_bytes(b"\x01\x00")
    with pytest.raises(InputError, match=r"short\.idx: its sequences end at byte 6 but .*short\.bin has 2"):
        merge_pairs([str(tmp_path / "short")], plain_write, str(tmp_path / "m"))
    Path(tmp_path / "junk.idx").write_bytes(b"not an index")
    with pytest.raises(InputError, match=r"junk\.idx: not a Megatron \.idx file"):
        merge_pairs([str(tmp_path / "junk")], plain_write, str(tmp_path / "m"))

"""Megatron's indexed dataset on disk: a ``.bin`` of token ids and the ``.idx`` that cuts it into sequences, as
Megatron-LM's ``IndexedDataset`` reads them (layout: docs/reference.md, "The format"); :func:`merge_pairs`
concatenates pairs without decoding tokens, streaming each section in chunks."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from curator_slurm import fs
from curator_slurm.errors import InputError

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
#: Megatron's ``DType`` codes.
DTYPE_OF_CODE: dict[int, np.dtype] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.int8),
    3: np.dtype(np.int16),
    4: np.dtype(np.int32),
    5: np.dtype(np.int64),
    6: np.dtype(np.float64),
    7: np.dtype(np.float32),
    8: np.dtype(np.uint16),
}
CODE_OF_DTYPE = {dtype: code for code, dtype in DTYPE_OF_CODE.items()}
_FIXED = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequence count, document count
HEADER_BYTES = _FIXED.size  # 34
#: Entries per chunk when a section is streamed (8 bytes each at most: 8 MiB per chunk).
CHUNK = 1 << 20
_COPY_BYTES = 8 << 20


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every token id of a ``vocab_size`` vocabulary (ids 0..vocab_size-1) fits in it (ids
    0..65535), else int32; for ids that are not dense, give the largest id plus one."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.int32)


@dataclass(frozen=True)
class IndexHeader:
    """What the fixed part of an ``.idx`` says, and where its three arrays start."""

    path: str
    dtype: np.dtype
    sequences: int
    documents: int  # entries of the document index (documents + 1)

    @property
    def lengths_offset(self) -> int:
        return HEADER_BYTES

    @property
    def pointers_offset(self) -> int:
        return HEADER_BYTES + 4 * self.sequences

    @property
    def documents_offset(self) -> int:
        return HEADER_BYTES + 12 * self.sequences


def read_header(path: str) -> IndexHeader:
    """The header of the ``.idx`` at ``path``; an error naming the file when it is not one."""
    head = fs.read_range(path, 0, HEADER_BYTES)
    if len(head) < HEADER_BYTES or head[:9] != MAGIC:
        raise InputError(f"{path}: not a Megatron .idx file (no {MAGIC!r} header)")
    _, version, code, sequences, documents = _FIXED.unpack(head)
    if version != VERSION or code not in DTYPE_OF_CODE:
        raise InputError(f"{path}: .idx version {version}, dtype code {code}: only version 1 with a known code is read")
    header = IndexHeader(path, DTYPE_OF_CODE[code], sequences, documents)
    expected = header.documents_offset + 8 * documents
    size = fs.size(path)
    if size != expected:
        raise InputError(f"{path}: {size} bytes, but its header promises {expected}; rewrite it")
    return header


def _header_bytes(dtype: np.dtype, sequences: int, documents: int) -> bytes:
    return _FIXED.pack(MAGIC, VERSION, CODE_OF_DTYPE[np.dtype(dtype)], sequences, documents)


def write_index(f: BinaryIO, dtype: np.dtype, lengths: np.ndarray) -> None:
    """The ``.idx`` of one sequence per document with ``lengths`` tokens each, into ``f``."""
    lengths = np.asarray(lengths, dtype=np.int32)
    pointers = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths):
        np.cumsum(lengths[:-1], dtype=np.int64, out=pointers[1:])
    pointers *= np.dtype(dtype).itemsize
    f.write(_header_bytes(dtype, len(lengths), len(lengths) + 1))
    f.write(lengths.tobytes())
    f.write(pointers.tobytes())
    f.write(np.arange(len(lengths) + 1, dtype=np.int64).tobytes())


def _section(path: str, offset: int, dtype: type, count: int) -> np.ndarray:
    kind = np.dtype(dtype).newbyteorder("<")
    if fs.is_local(path):
        return np.fromfile(path, dtype=kind, count=count, offset=offset)
    return np.frombuffer(fs.read_range(path, offset, count * kind.itemsize), dtype=kind)  # one ranged GET


def _chunks(count: int) -> list[tuple[int, int]]:
    return [(start, min(CHUNK, count - start)) for start in range(0, count, CHUNK)]


def pair_tokens(prefix: str, dtype: np.dtype) -> int:
    """Tokens in ``prefix.bin`` (its size over the token size): what merging plans with, without reading."""
    size = fs.size(prefix + ".bin")
    if size % dtype.itemsize:
        raise InputError(f"{prefix}.bin: {size} bytes is not a whole number of {dtype} tokens; rewrite it")
    return size // dtype.itemsize


def merge_pairs(prefixes: list[str], write: Callable[[str, Callable[[BinaryIO], None]], None], out_prefix: str) -> None:
    """Concatenate the pairs ``prefixes`` (``.bin``/``.idx`` each) into ``out_prefix`` in that order, without
    decoding tokens; ``write(path, fill)`` creates each output (e.g. atomically) and calls ``fill(file)``.

    Every section is streamed in chunks of :data:`CHUNK` entries, so memory does not depend on how many
    documents or tokens there are. Each input is checked: its pointers must cover its ``.bin`` exactly."""
    headers = [read_header(p + ".idx") for p in prefixes]
    dtypes = {h.dtype for h in headers}
    if len(dtypes) > 1:
        raise InputError(f"cannot merge token files of different dtypes {sorted(map(str, dtypes))}: {prefixes}")
    dtype = headers[0].dtype if headers else np.dtype(np.uint16)
    sequences = sum(h.sequences for h in headers)
    documents = 1 + sum(h.documents - 1 for h in headers)

    def fill_bin(f: BinaryIO) -> None:
        for prefix in prefixes:
            with fs.open_input(prefix + ".bin") as src:
                shutil.copyfileobj(src, f, _COPY_BYTES)

    def fill_idx(f: BinaryIO) -> None:
        f.write(_header_bytes(dtype, sequences, documents))
        for h in headers:
            for start, n in _chunks(h.sequences):
                f.write(_section(h.path, h.lengths_offset + 4 * start, np.int32, n).astype("<i4").tobytes())
        base = 0
        for h, prefix in zip(headers, prefixes, strict=True):
            end = 0
            for start, n in _chunks(h.sequences):
                pointers = _section(h.path, h.pointers_offset + 8 * start, np.int64, n)
                f.write((pointers + base).astype("<i8").tobytes())
                last_length = _section(h.path, h.lengths_offset + 4 * (start + n - 1), np.int32, 1)
                end = int(pointers[-1]) + int(last_length[0]) * dtype.itemsize
            size = fs.size(prefix + ".bin")
            if end != size:
                raise InputError(f"{h.path}: its sequences end at byte {end} but {prefix}.bin has {size}; rewrite both")
            base += size
        f.write(np.zeros(1, dtype="<i8").tobytes())
        offset = 0
        for h in headers:
            for start, n in _chunks(h.documents - 1):
                indices = _section(h.path, h.documents_offset + 8 * (start + 1), np.int64, n)
                f.write((indices + offset).astype("<i8").tobytes())
            offset += h.sequences

    write(out_prefix + ".bin", fill_bin)
    write(out_prefix + ".idx", fill_idx)

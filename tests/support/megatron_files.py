"""Test helpers for Megatron token files: a reader written from Megatron's documented ``.idx`` layout (not the
writer's code), and small BPE tokenizers trained with ``tokenizers``' own trainer on real text."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

#: Megatron-LM megatron/core/datasets/indexed_dataset.py: DType codes.
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}
EOT = "<|endoftext|>"


def read_megatron(prefix: Path | str) -> dict[str, Any]:
    """``prefix.idx`` / ``prefix.bin`` read field by field: magic ``MMIDIDX\\x00\\x00``, version (int64), dtype
    code (uint8), sequence count (int64), document count (int64), int32 lengths, int64 byte pointers, int64
    document indices; ``sequences`` are the token lists the pointers and lengths cut from the ``.bin``."""
    idx = Path(f"{prefix}.idx").read_bytes()
    data = Path(f"{prefix}.bin").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    (version,) = struct.unpack("<Q", idx[9:17])
    (code,) = struct.unpack("<B", idx[17:18])
    sequences, documents = struct.unpack("<QQ", idx[18:34])
    at = 34
    lengths = np.frombuffer(idx, "<i4", sequences, at)
    at += 4 * sequences
    pointers = np.frombuffer(idx, "<i8", sequences, at)
    at += 8 * sequences
    doc_index = np.frombuffer(idx, "<i8", documents, at)
    at += 8 * documents
    assert at == len(idx), "nothing after the document index"
    dtype = np.dtype(DTYPES[code]).newbyteorder("<")
    tokens = [np.frombuffer(data, dtype, int(n), int(p)).tolist() for n, p in zip(lengths, pointers, strict=True)]
    covered = int(pointers[-1]) + int(lengths[-1]) * dtype.itemsize if sequences else 0
    assert covered == len(data), "the sequences cover the .bin exactly"
    return {"version": version, "code": code, "sequences": tokens, "document_index": doc_index.tolist()}


def sequences_of(prefix: Path | str) -> list[list[int]]:
    """The sequences of a pair, after checking that each document is one sequence (document index 0..S)."""
    got = read_megatron(prefix)
    assert got["version"] == 1
    assert got["document_index"] == list(range(len(got["sequences"]) + 1))
    return got["sequences"]


def pairs(directory: Path) -> list[Path]:
    """The pair prefixes in ``directory`` (visible ``.idx`` files with their ``.bin``), sorted by name."""
    found = sorted(p.with_suffix("") for p in directory.glob("*.idx") if not p.name.startswith("."))
    assert all(p.with_suffix(".bin").exists() for p in found)
    return found


def corpus_texts(root: Path) -> Iterator[str]:
    for path in sorted(root.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            text = json.loads(line).get("text")
            if text:
                yield text


def train_tokenizer(path: Path, texts: list[str], vocab_size: int = 1500, extra_tokens: int = 0) -> Any:
    """A byte-level BPE tokenizer trained on ``texts`` with ``<|endoftext|>`` as its special token, saved to
    ``path``; ``extra_tokens`` added tokens come before the special one, so with 70000 of them the EOS id is
    above 65535 and the vocabulary needs int32."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[] if extra_tokens else [EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )  # fmt: skip
    tokenizer.train_from_iterator(texts, trainer)
    if extra_tokens:
        tokenizer.add_tokens([f"<x{i}>" for i in range(extra_tokens)])
        tokenizer.add_special_tokens([EOT])
    tokenizer.save(str(path))
    return tokenizer


def python_docs_text() -> list[str]:
    """Real English text: the docstrings of some of Python's own standard library modules."""
    import argparse
    import collections
    import json as json_module
    import os
    import pathlib
    import subprocess
    import textwrap

    texts = []
    for module in (argparse, collections, json_module, os, pathlib, subprocess, textwrap):
        for name in dir(module):
            doc = getattr(getattr(module, name, None), "__doc__", None)
            if isinstance(doc, str) and len(doc) > 40:
                texts.append(doc)
    return texts

"""Tokenize documents into Megatron indexed datasets (``.bin``/``.idx``, see :mod:`.megatron_format`):
:class:`MegatronTokenizerWriter`, NeMo Curator's name and parameters, and where it differs on purpose.
Design: docs/design.md, section Tokenization."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from curator_slurm import extras, fs
from curator_slurm.errors import InputError
from curator_slurm.settings import limit_tokenizer_threads
from curator_slurm.stages.io.megatron_format import token_dtype, write_index
from curator_slurm.stages.io.outputs import Part, append
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.stages.text.compute import call
from curator_slurm.tasks import DocumentBatch, FileGroupTask

TOKENIZER_FILE = "tokenizer.json"
FEATURE = "MegatronTokenizerWriter"


def tokenizer_file(model_identifier: str) -> str:
    """The ``tokenizer.json`` that ``model_identifier`` names: the file itself, or the one in a directory."""
    path = os.path.abspath(os.path.expanduser(model_identifier))
    if os.path.isdir(path):
        path = os.path.join(path, TOKENIZER_FILE)
        if not os.path.isfile(path):
            raise InputError(
                f"{model_identifier}: a tokenizer directory needs a {TOKENIZER_FILE} (the Hugging Face fast "
                "tokenizer); for a model with only a slow tokenizer, AutoTokenizer.from_pretrained(dir)."
                "save_pretrained(dir) once, on a machine with transformers, writes it"
            )
    elif not os.path.isfile(path):
        raise InputError(
            f"model_identifier={model_identifier!r}: no such file or directory. The tokenizer is read locally and "
            f"never downloaded: give a {TOKENIZER_FILE} or a directory that holds one (e.g. a downloaded model's)"
        )
    return path


def load_tokenizer(file: str) -> Any:
    """The ``tokenizers.Tokenizer`` of ``file``, or an error naming the file and what is wrong with it
    (``tokenizers`` raises a bare ``Exception`` that names neither)."""
    tokenizers = extras.load("tokenizers", FEATURE)
    try:
        return tokenizers.Tokenizer.from_file(file)
    except Exception as e:
        raise InputError(
            f"{file}: Hugging Face tokenizers cannot read it ({e}); give a complete {TOKENIZER_FILE} (a fast "
            "tokenizer's, as tokenizer.save(path) or AutoTokenizer.save_pretrained(dir) writes it)"
        ) from e


def configured_eos(model_identifier: str) -> str | None:
    """The ``eos_token`` a tokenizer directory declares (``tokenizer_config.json``, else
    ``special_tokens_map.json``), or None (a bare ``tokenizer.json`` declares none). A file there that is not
    JSON is an error naming it: its eos_token would otherwise be silently missed."""
    directory = model_identifier if os.path.isdir(model_identifier) else os.path.dirname(model_identifier)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as f:
                value = json.load(f).get("eos_token")
        except OSError:
            continue
        except ValueError as e:
            raise InputError(f"{path}: not valid JSON ({e}); repair it, or remove it and give eod_token='...'") from e
        except AttributeError:
            continue
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str) and value:
            return value
    return None


def tokenizer_options_problem(tokenizer: str, eos_token: str | None, no_eos: bool) -> str | None:
    """For a script whose options are ``--tokenizer``, ``--eos-token`` and ``--no-eos``: what is wrong with
    them, in those options' words, before any work (None: nothing)."""
    if not os.path.exists(tokenizer):
        return (
            f"--tokenizer {tokenizer}: no such file or directory (give a local tokenizer.json, or a directory with one)"
        )
    if eos_token or no_eos:
        return None
    try:
        declared = configured_eos(tokenizer)
    except InputError as e:
        return f"--tokenizer {tokenizer}: {e}"
    if declared is None:
        return (
            f"--tokenizer {tokenizer} declares no end-of-document token (a bare tokenizer.json has none): give "
            "--eos-token T (e.g. '<|endoftext|>' or '</s>', whichever the tokenizer has), or --no-eos"
        )
    return None


@dataclass(frozen=True)
class TokenizerSpec:
    """What a process needs to tokenize: the file, the special ids to add, and the token dtype."""

    file: str
    digest: str  # of the tokenizer file's bytes: a changed tokenizer is a changed output
    largest_id: int  # of every token it can give: its vocabulary's, its added tokens', EOD's and BOS's
    eod_id: int | None
    bos_id: int | None

    @property
    def dtype(self) -> np.dtype:
        """The dtype that holds every id the writer can write (ids need not be dense: a vocabulary of a few
        entries may hold the id 70000)."""
        return token_dtype(self.largest_id + 1)


def resolve_tokenizer(
    model_identifier: str, append_eod: bool, eod_token: str | None, bos_token: str | None
) -> TokenizerSpec:
    """Load the tokenizer once (when the stage is built) to check the special tokens and size the dtype."""
    import xxhash

    file = tokenizer_file(model_identifier)
    tokenizer = load_tokenizer(file)

    def token_id(token: str, what: str) -> int:
        found = tokenizer.token_to_id(token)
        if found is None:
            raise InputError(f"{what} {token!r} is not a token of {file}; give one of its special tokens")
        return int(found)

    eod_id = None
    if append_eod:
        name = eod_token or configured_eos(model_identifier)
        if name is None:
            raise InputError(
                f"{file} declares no eos_token (a bare tokenizer.json has none): give eod_token='...' (e.g. "
                "'<|endoftext|>' or '</s>', whichever the tokenizer has), or append_eod=False"
            )
        eod_id = token_id(name, "eod_token" if eod_token else f"eos_token (declared in {os.path.dirname(file)})")
    bos_id = token_id(bos_token, "bos_token") if bos_token else None
    with open(file, "rb") as f:
        digest = xxhash.xxh3_64_hexdigest(f.read())
    ids = [*tokenizer.get_vocab(with_added_tokens=True).values(), *(i for i in (eod_id, bos_id) if i is not None)]
    return TokenizerSpec(file, digest, max(ids, default=0), eod_id, bos_id)


def log2_counts(values: np.ndarray) -> list[int]:
    """How many of ``values`` have each bit length (0, 1, 2-3, 4-7, ...), up to the largest: the log2 buckets of
    the run's stats files (docs/reference.md, "Stats files")."""
    if not len(values):
        return []
    _, bits = np.frexp(np.asarray(values, np.float64))
    return [int(n) for n in np.bincount(bits)]


class MegatronTokenizerWriter(BaseWriter):
    """Tokenize ``text_field`` of each batch and write ``<source id>.bin``/``.idx`` (Megatron's indexed dataset,
    one sequence per document) into ``path``; ``model_identifier`` is a local ``tokenizer.json`` or tokenizer
    directory. The task's token count is in its metadata and ledger record (``tokens``).

    Args:
        path: the output directory, local or ``s3://``.
        model_identifier: a local ``tokenizer.json``, or a directory holding one; never downloaded.
        text_field: the field tokenized.
        tokenization_batch_size: texts encoded per call (bounds memory).
        append_eod: end every document's sequence with the EOD token.
        eod_token: the EOD token (default: the directory's ``eos_token``).
        bos_token: a token that opens every sequence (default none).
        tokenizer_threads: the Rust threads that encode, in each process running the stage.
    """

    name = "megatron_tokenizer_writer"
    extension = ".bin"
    #: params() records the tokenizer by its bytes (digest, eod and bos ids), not by the resolved path in
    #: _spec; _tokenizer is what setup() loads.
    fingerprint_exclude = frozenset({"_spec", "_tokenizer"})

    def __init__(
        self,
        path: str | os.PathLike,
        model_identifier: str | os.PathLike,
        text_field: str = "text",
        tokenization_batch_size: int = 1000,
        append_eod: bool = True,
        eod_token: str | None = None,
        bos_token: str | None = None,
        tokenizer_threads: int = 1,
    ) -> None:
        super().__init__(path)
        extras.require("tokenizers", FEATURE)
        if tokenization_batch_size < 1 or tokenizer_threads < 1:
            raise ValueError(
                f"{FEATURE}(tokenization_batch_size={tokenization_batch_size}, tokenizer_threads="
                f"{tokenizer_threads}): both must be >= 1"
            )
        self.model_identifier = os.fspath(model_identifier)
        self.text_field = text_field
        self.tokenization_batch_size = tokenization_batch_size
        self.append_eod = append_eod
        self.eod_token = eod_token
        self.bos_token = bos_token
        self.tokenizer_threads = tokenizer_threads
        self._spec = resolve_tokenizer(self.model_identifier, append_eod, eod_token, bos_token)
        self._tokenizer: Any = None

    def params(self) -> dict[str, Any]:
        out = {k: v for k, v in super().params().items() if k not in ("model_identifier", "tokenizer_threads")}
        # The tokenizer's bytes, not where it lies, define the output; the thread count does not change it.
        return {**out, "tokenizer": self._spec.digest, "eod_id": self._spec.eod_id, "bos_id": self._spec.bos_id}

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.text_field]

    @property
    def dtype(self) -> np.dtype:
        """The token dtype of every ``.bin`` this writer makes: uint16 when the tokenizer's largest id (of its
        vocabulary, added tokens, EOD and BOS) fits, else int32."""
        return self._spec.dtype

    def setup(self, worker_metadata: dict[str, Any] | None = None) -> None:
        super().setup(worker_metadata)
        limit_tokenizer_threads(self.tokenizer_threads)
        self._tokenizer = load_tokenizer(self._spec.file)

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_tokenizer": None}  # workers load their own in setup()

    def texts(self, task: DocumentBatch) -> list[str]:
        """The non-empty texts of the batch, in order (empty and null ones get no sequence)."""
        table = task.data
        if self.text_field not in table.column_names:
            where = task.where()
            raise InputError(f"{where}: no field {self.text_field!r} to tokenize; the data has {table.column_names}")
        column = table.column(self.text_field)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            if not pa.types.is_null(column.type):
                raise InputError(f"{task.task_id}: field {self.text_field!r} is {column.type}, not text")
            return []
        keep = call("greater", call("utf8_length", column), 0)
        return call("filter", column, call("coalesce", keep, False)).to_pylist()

    def encode_into(self, texts: list[str], f: BinaryIO) -> np.ndarray:
        """Write the token ids of ``texts`` (with BOS/EOD) into ``f``; the length of each sequence."""
        if self._tokenizer is None:
            self.setup()
        spec, dtype = self._spec, self._spec.dtype
        head = [] if spec.bos_id is None else [spec.bos_id]
        tail = [] if spec.eod_id is None else [spec.eod_id]
        extra = len(head) + len(tail)
        lengths = np.empty(len(texts), dtype=np.int32)
        size = self.tokenization_batch_size
        for start in range(0, len(texts), size):
            encodings = self._tokenizer.encode_batch(texts[start : start + size], add_special_tokens=False)
            flat: list[int] = []
            for i, encoding in enumerate(encodings, start):
                ids = encoding.ids
                lengths[i] = len(ids) + extra
                flat.extend(head)
                flat.extend(ids)
                flat.extend(tail)
            f.write(np.array(flat, dtype=dtype).tobytes())
        return lengths

    def existing_outputs(self) -> list[str]:
        return sorted(super().existing_outputs() + fs.finished_files(self.path, ".idx"))

    def new_part(self, stem: str) -> Part:
        return _TokenPart(fs.join(self.path, stem), self)

    def process(self, task: DocumentBatch) -> FileGroupTask:
        texts = self.texts(task)
        key = task.source_id or task.task_id
        out = self.opened(task)
        seen = {id(p): len(p.lengths) for p in out.parts if isinstance(p, _TokenPart)}
        if texts or not out.parts:
            table = pa.table({self.text_field: pa.array(texts, pa.string())})
            append(out, table, lambda: self.new_part(key), self.max_file_size, key, self.path)
        added = [a for p in out.parts if isinstance(p, _TokenPart) for a in p.lengths[seen.get(id(p), 0) :]]
        lengths = np.concatenate(added) if added else np.empty(0, dtype=np.int64)
        tokens = int(lengths.sum(dtype=np.int64))
        return self.receipt(task, len(texts), tokens=tokens, token_histogram=log2_counts(lengths))


class _TokenPart(Part):
    """A ``.bin`` of token ids appended batch by batch; its ``.idx`` written at :meth:`finish` from the lengths."""

    def __init__(self, stem: str, writer: MegatronTokenizerWriter) -> None:
        super().__init__(fs.AtomicFile(stem + writer.extension), writer.extension)
        self.stem, self.writer = stem, writer
        self.lengths: list[np.ndarray] = []
        self.tokens = 0

    def write(self, table: pa.Table) -> bool:
        lengths = self.writer.encode_into(table.column(0).to_pylist(), self.main.file)
        self.lengths.append(lengths)
        self.tokens += int(lengths.sum(dtype=np.int64))
        return True

    def finish(self) -> None:
        if len(self.files) > 1:  # ended already
            return
        index = fs.AtomicFile(self.stem + ".idx")
        self.files.append((index, ".idx"))
        lengths = np.concatenate(self.lengths) if self.lengths else np.empty(0, dtype=np.int32)
        write_index(index.file, self.writer.dtype, lengths)

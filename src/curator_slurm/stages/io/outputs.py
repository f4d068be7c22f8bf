"""A writer's open output of one source task: parts (files under temporary names) that batches are appended to,
rolled over at a size limit, named at the end by the source task (and part number) and published together.
Design: docs/design.md, section Readers and writers; names: docs/reference.md."""

from __future__ import annotations

import contextlib
import gzip
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pyarrow as pa
import xxhash

from curator_slurm import fs
from curator_slurm.errors import OutputError, OutputSpaceError, is_out_of_space, out_of_space

#: Default ``max_file_size`` of the writers: an output part is closed, and the next begun, once it holds this
#: many bytes (1 GiB; a source task's output smaller than that is one file).
DEFAULT_MAX_FILE_SIZE = 1 << 30
#: A run of more source tasks than this warns about a writer without ``fan_out`` (a flat directory of as many files).
FAN_OUT_ABOVE = 10_000


def fan_out_dir(stem: str) -> str:
    """The two-level subdirectory (``ab/cd``) a fanned-out output named ``stem`` goes into: from a hash of its
    name, so that 65,536 directories share the files evenly whatever the names look like."""
    digest = xxhash.xxh64_hexdigest(stem.encode("utf-8", "surrogateescape"))
    return f"{digest[:2]}/{digest[2:4]}"


#: What :class:`JsonlWriter` takes for ``compression``: the file ending of each.
JSONL_COMPRESSIONS = {None: ".jsonl", "gzip": ".jsonl.gz", "zstd": ".jsonl.zst"}
#: The gzip level of compressed JSONL (zlib's own default: about datatrove's size, at a third of level 9's time).
GZIP_LEVEL = 6


class _Unclosable(io.RawIOBase):
    """``f`` for a compressing stream that closes what it wraps: writes go through, a close leaves ``f`` open (the
    atomic write still flushes, measures and renames it)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()


@contextlib.contextmanager
def compressed(f: BinaryIO, compression: str | None) -> Iterator[Any]:
    """A stream writing into ``f``, compressed with ``compression`` (None: ``f`` itself), always the same bytes
    for the same data however it is written in pieces: gzip with no file name and time 0 in its header
    (:data:`GZIP_LEVEL`); zstd one frame from pyarrow's streaming compressor at its fixed default level, with
    no content size in the header."""
    if compression is None:
        yield f
    elif compression == "gzip":
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=GZIP_LEVEL, mtime=0) as stream:
            yield stream
    else:
        stream = pa.CompressedOutputStream(_Unclosable(f), compression)
        try:
            yield stream
        finally:
            stream.close()


class Part:
    """One output file being written (and what a format adds at its end, e.g. a footer or an index file).

    Subclasses implement :meth:`write` and, when the format has an end, :meth:`finish`."""

    def __init__(self, main: fs.AtomicFile, ending: str) -> None:
        self.main = main
        #: The files of the part, each with the ending it is published under (the main file's first).
        self.files: list[tuple[fs.AtomicFile, str]] = [(main, ending)]
        self.rows = 0

    def write(self, table: pa.Table) -> bool:
        """Append ``table``; False (nothing written) when this part cannot hold it (another schema)."""
        raise NotImplementedError

    def size(self) -> int:
        """Bytes of the main file so far."""
        return self.main.size()

    def finish(self) -> None:
        """End the format (a compressed stream's end, a Parquet footer, an index file); nothing by default."""

    def discard(self) -> None:
        for f, _ in self.files:
            f.discard()


@dataclass
class OpenOutput:
    """What a writer has made of one source task so far in this process."""

    stem: str  # the output's name when it is only part of its source task's batches (see ``first``)
    dataset_name: str
    parts: list[Part] = field(default_factory=list)
    rows: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # what a writer sums for the end (tokens)
    broken: BaseException | None = None


@dataclass(frozen=True)
class Naming:
    """How a writer names what it publishes: its directory, the ending of its main file, whether outputs go into
    hashed subdirectories (:func:`fan_out_dir`)."""

    path: str
    fan_out: bool

    def final(self, stem: str, part: int, parts: int, ending: str) -> str:
        """The published path of part ``part`` of ``parts`` of the output ``stem``: ``<stem><ending>`` when it
        is the only one, else ``<stem>-p<part><ending>`` (parts numbered from 0, in the order written)."""
        name = stem if parts == 1 else f"{stem}-p{part}"
        if not self.fan_out:
            return fs.join(self.path, name + ending)
        return fs.join(self.path, fan_out_dir(stem), name + ending)


def append(
    out: OpenOutput, table: pa.Table, new_part: Callable[[], Part], max_file_size: int, source: str, where: str
) -> None:
    """Append ``table`` to ``out``: to its last part, or to a new one when there is none, the last is full
    (``max_file_size`` bytes or more) or cannot hold it (``where``: the directory, for a full disk's error). An
    error leaves ``out`` broken (whatever was half-written cannot be taken back): the source task fails and is
    done again whole."""
    if out.broken is not None:
        raise OutputError(
            f"the output of source task {source} was left incomplete by an earlier error ({out.broken!r}); "
            "the task is failed and done again whole by a re-run"
        ) from out.broken
    try:
        part = out.parts[-1] if out.parts else None
        if part is not None and part.rows == 0 and table.num_rows:  # an empty start: its schema need not hold
            part.discard()
            out.parts.pop()
            part = None
        if part is not None and part.size() >= max_file_size:
            part.finish()
            part = None
        if part is None or not part.write(table):
            if part is not None:
                part.finish()
            part = new_part()
            out.parts.append(part)
            if not part.write(table):
                raise OutputError(f"a new output part of source task {source} refused a batch")
        part.rows += table.num_rows
        out.rows += table.num_rows
    except BaseException as e:
        out.broken = e
        if isinstance(e, OSError) and is_out_of_space(e) and not isinstance(e, OutputSpaceError):  # say where
            raise out_of_space(e, where) from e
        raise


def publish(out: OpenOutput, naming: Naming, stem: str, sync: bool) -> tuple[list[str], list[int]]:
    """End ``out``'s last part and publish every part under its name from ``stem``; (paths, bytes). On an
    error, what is not published yet is dropped."""
    try:
        if out.parts:
            out.parts[-1].finish()
        paths: list[str] = []
        sizes: list[int] = []
        made: set[str] = set()
        for k, part in enumerate(out.parts):
            for f, ending in part.files:
                final = naming.final(stem, k, len(out.parts), ending)
                directory = fs.dirname(final)
                if directory not in made and naming.fan_out:
                    fs.makedirs(directory)
                made.add(directory)
                sizes.append(f.publish(final, sync=sync))
                paths.append(final)
        return paths, sizes
    except BaseException as e:
        for part in out.parts:
            part.discard()
        if isinstance(e, OSError) and is_out_of_space(e) and not isinstance(e, OutputSpaceError):
            raise out_of_space(e, naming.path) from e
        raise


def discard(out: OpenOutput) -> None:
    for part in out.parts:
        part.discard()


__all__ = [
    "DEFAULT_MAX_FILE_SIZE",
    "FAN_OUT_ABOVE",
    "GZIP_LEVEL",
    "JSONL_COMPRESSIONS",
    "Naming",
    "OpenOutput",
    "Part",
    "append",
    "compressed",
    "discard",
    "fan_out_dir",
    "publish",
]

"""Turning paths into file groups: the usual source stage."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from curator_slurm import fs
from curator_slurm.errors import InputError
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.tasks import EmptyTask, FileGroupTask

logger = logging.getLogger(__name__)

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3}
_UNITS.update({"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "tb": 1000**4})


def parse_size(value: int | str) -> int:
    """``"128MiB"`` → 134217728; plain integers are bytes."""
    if isinstance(value, int):
        size = value
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise ValueError(f"blocksize={value!r} is not a size; write e.g. 134217728, '128MiB' or '1GB'")
        size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise ValueError(f"blocksize={value!r} must be positive")
    return size


def list_files(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    extensions: Iterable[str] | None = None,
    recursive: bool = True,
) -> list[str]:
    """Sorted, de-duplicated absolute paths (or URIs) of the files under ``paths`` (see :func:`list_inputs`)."""
    exts = list(extensions) if extensions else None
    patterns = fs.name_patterns(exts, compressed=False) if exts else None
    return list_inputs(paths, patterns, recursive, fs.describe_names(exts, False) if exts else "").files


def list_inputs(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    patterns: tuple[str, ...] | None,
    recursive: bool = True,
    wanted: str = "",
) -> fs.Listing:
    """The files under ``paths`` whose names ``patterns`` take (:func:`fs.name_patterns`: endings
    in any case, compressions, globs; ``wanted`` says which, for messages), with their sizes; every file
    left out is logged in one line.

    Hidden files (a leading dot, which is how writers name unfinished files) are skipped in directories; an
    explicitly named file is always taken. Symbolic links to directories are followed, each directory and
    file listed once (a cycle or a second link to it is logged). A dangling link or a FIFO is an error.
    """
    roots = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not roots:
        raise InputError("no input paths given; pass a file or directory")
    listing = fs.list_tree([os.fspath(r) for r in roots], patterns, recursive)
    wanted = f" {wanted}" if wanted and patterns else ""
    if listing.skipped:
        logger.warning(
            f"skipped {len(listing.skipped)} file(s) not{wanted}: {_names(listing.skipped)}; pass "
            "file_extensions=[...] (endings or globs) to read them"
        )
    if listing.hidden:
        logger.info(f"skipped {len(listing.hidden)} hidden name(s) (a leading dot): {_names(listing.hidden)}")
    for path, first in listing.repeated:
        logger.warning(f"{path}: already listed as {first} (a symbolic link cycle or a second link); read once")
    if not listing.sizes:
        where = ", ".join(os.fspath(r) for r in roots)
        raise InputError(f"{where}: no files{wanted} found; check the path and extensions")
    return listing


def _names(paths: list[str], most: int = 10) -> str:
    shown = ", ".join(fs.basename(p) for p in paths[:most])
    return shown + (f" and {len(paths) - most} more" if len(paths) > most else "")


#: Endings of files that can only be read from their start: never split into byte ranges.
COMPRESSED_ENDINGS = tuple(fs.COMPRESSIONS)


def byte_ranges(size: int, blocksize: int) -> list[tuple[int, int]]:
    """``[start, end)`` pieces of a ``size``-byte file, as equal as whole bytes allow, none larger
    than ``blocksize`` (one piece when the file fits)."""
    pieces = max(1, -(-size // blocksize))
    bounds = [size * k // pieces for k in range(pieces + 1)]
    return list(pairwise(bounds))


class FilePartitioningStage(ProcessingStage[EmptyTask, FileGroupTask]):
    """Lists input files and groups them into :class:`FileGroupTask` s.

    Groups are by count (``files_per_partition``) or by size (``blocksize``, e.g. ``"512MiB"``); with
    neither, each file is its own group. Files are sorted first, so the groups, and therefore their
    ids, do not depend on the order the filesystem lists them in.

    ``split_files`` (with ``blocksize``) also cuts every uncompressed file larger than ``blocksize``
    into byte ranges of at most ``blocksize``, each its own source task: one huge file then no longer
    makes one shard (or one worker) the last to finish. The JSONL reader reads the lines that start
    in its range, the Parquet reader the row groups that start in it. Compressed files cannot be
    split and stay whole, except those whose endings the reader names in ``splittable_endings``.
    """

    name = "file_partitioning"
    #: Compressed endings whose files can still be cut at record boundaries (a reader sets it: the WARC
    #: reader's multi-member ``.warc.gz``); other compressed files stay whole.
    splittable_endings: tuple[str, ...] = ()
    #: The names taken follow from ``file_extensions`` and the reader (which the fingerprint records); the
    #: expanded patterns and their description stay out, so the fingerprint is what it was before them.
    fingerprint_exclude = frozenset({"_patterns", "_wanted"})

    def __init__(
        self,
        file_paths: str | os.PathLike | list[str],
        files_per_partition: int | None = None,
        blocksize: int | str | None = None,
        file_extensions: list[str] | None = None,
        limit: int | None = None,
        recursive: bool = True,
        split_files: bool = False,
        patterns: tuple[str, ...] | None = None,
        wanted: str = "",
    ) -> None:
        if files_per_partition is not None and blocksize is not None:
            raise ValueError("give files_per_partition or blocksize, not both")
        if split_files and blocksize is None:
            raise ValueError(
                "split_files=True needs blocksize=..., the largest piece a file is cut into (e.g. '256MiB')"
            )
        if files_per_partition is not None and files_per_partition < 1:
            raise ValueError(f"files_per_partition={files_per_partition} must be >= 1")
        if limit is not None and limit < 1:
            raise ValueError(f"limit={limit} must be >= 1")
        self.file_paths = file_paths if isinstance(file_paths, (str, os.PathLike)) else list(file_paths)
        self.files_per_partition = files_per_partition
        self.blocksize = parse_size(blocksize) if blocksize is not None else None
        self.file_extensions = list(file_extensions) if file_extensions else None
        self.limit = limit
        self.recursive = recursive
        self.split_files = split_files
        # The names listed: a reader's own patterns (compressions, any case), else the extensions' (any case).
        # Private, so the fingerprint (file_extensions) stays what it was before patterns existed.
        self._patterns = patterns or (fs.name_patterns(self.file_extensions, False) if self.file_extensions else None)
        self._wanted = wanted or (fs.describe_names(self.file_extensions, False) if self.file_extensions else "")

    @property
    def patterns(self) -> tuple[str, ...] | None:
        """The lower-case endings and globs of the file names this stage lists (None: every name)."""
        return self._patterns

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], []

    def params(self) -> dict[str, Any]:
        """Everything but where the input is mounted: the inputs are identified by the source task ids (paths
        relative to the root), so nodes that mount the data at different paths, or a moved copy, agree."""
        return {k: v for k, v in super().params().items() if k != "file_paths"}

    def process(self, task: EmptyTask) -> list[FileGroupTask]:
        listing = list_inputs(self.file_paths, self._patterns, self.recursive, self._wanted)
        files, sizes = listing.files, listing.sizes
        # A group is a list of whole files, or (path, start, end) for a piece of a split file.
        groups: list[list[str] | tuple[str, int, int]] = []
        if self.blocksize is not None:
            current: list[str] = []
            current_bytes = 0
            whole_but_large = 0
            for f in files:
                if sizes[f] > self.blocksize and self.split_files:
                    if f.lower().endswith(COMPRESSED_ENDINGS) and not f.lower().endswith(self.splittable_endings):
                        whole_but_large += 1
                    else:
                        if current:
                            groups.append(current)
                            current, current_bytes = [], 0
                        groups.extend((f, start, end) for start, end in byte_ranges(sizes[f], self.blocksize))
                        continue
                if current and current_bytes + sizes[f] > self.blocksize:
                    groups.append(current)
                    current, current_bytes = [], 0
                current.append(f)
                current_bytes += sizes[f]
            if current:
                groups.append(current)
            if whole_but_large:
                logger.warning(
                    f"{whole_but_large} compressed file(s) are larger than blocksize={self.blocksize} bytes but cannot "
                    "be split (a compressed stream is read from its start); each stays one source task"
                )
        else:
            step = self.files_per_partition or 1
            groups = [files[i : i + step] for i in range(0, len(files), step)]
        if self.limit is not None:
            groups = groups[: self.limit]
        dataset = task.dataset_name
        if not dataset and isinstance(self.file_paths, (str, os.PathLike)):
            dataset = (
                fs.basename(fs.absolute(self.file_paths))
                if fs.is_uri(self.file_paths)
                else os.path.basename(os.path.normpath(os.fspath(self.file_paths)))
            )
        root = input_root(self.file_paths)
        index = {f: i for i, f in enumerate(files)}  # a file's place in the sorted listing (document keys)
        return [
            FileGroupTask.from_range(*g, dataset_name=dataset, root=root, file_indices=[index[g[0]]])
            if isinstance(g, tuple)
            else FileGroupTask.from_paths(
                g, dataset_name=dataset, root=root, bytes=sum(sizes[f] for f in g), file_indices=[index[f] for f in g]
            )
            for g in groups
        ]


def input_root(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> str:
    """The directory that input paths are taken relative to: the directory given (or holding the file
    given); for several paths, their deepest common directory. Source task ids and document positions
    hash paths relative to it, so they survive a move or another mount point of the same data."""
    roots = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    dirs = [p if fs.isdir(p) else fs.dirname(p) for p in (fs.absolute(r) for r in roots)]
    return fs.common_root(dirs) if dirs else os.getcwd()

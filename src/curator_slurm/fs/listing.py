"""Listing the input files under a path: sorted, deterministic, and nothing left out without a word (skipped names
are returned for the log; cycles and repeats are reported; a dangling link or a FIFO that matches is an error)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import InputError
from .files import COMPRESSIONS, local_info, remember_sizes
from .paths import absolute, is_local, relative, resolve, uri_of
from .remote import bucket_exists
from .retry import call, permanent_error


def name_patterns(extensions: Iterable[str], compressed: bool) -> tuple[str, ...]:
    """The lower-case patterns a reader takes: each ending (a leading dot added), and with ``compressed``
    that ending followed by every compression ending the readers decode; globs (``*``, ``?``, ``[``) as given."""
    out: list[str] = []
    for ext in extensions:
        if any(c in ext for c in "*?["):
            out.append(ext.lower())
            continue
        ext = (ext if ext.startswith(".") else "." + ext).lower()
        out.append(ext)
        if compressed and not ext.endswith(tuple(COMPRESSIONS)):
            out.extend(ext + c for c in COMPRESSIONS)
    return tuple(dict.fromkeys(out))


def describe_names(extensions: Iterable[str], compressed: bool) -> str:
    """What :func:`name_patterns` takes, for messages: ``"ending in .jsonl, .json (in any case, plain or
    compressed)"``."""
    shown = [e if e.startswith(".") or any(c in e for c in "*?[") else "." + e for e in extensions]
    note = " (in any case, plain or compressed)" if compressed else ""
    return f"ending in {', '.join(dict.fromkeys(shown))}{note}"


def matches(name: str, patterns: tuple[str, ...] | None) -> bool:
    """Whether the file name ``name`` is taken by ``patterns`` (None takes every name)."""
    if patterns is None:
        return True
    lower = name.lower()
    return any(fnmatch.fnmatchcase(lower, p) if any(c in p for c in "*?[") else lower.endswith(p) for p in patterns)


@dataclass
class Listing:
    """The files found under some roots: ``sizes`` maps each taken file (canonical path or URI) to its size;
    ``skipped`` holds files that matched no pattern, ``hidden`` hidden names, ``repeated`` paths that reach a
    directory or file already listed (a symlink cycle or a second link), with what they repeat."""

    sizes: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    repeated: list[tuple[str, str]] = field(default_factory=list)

    @property
    def files(self) -> list[str]:
        return sorted(self.sizes)


def list_tree(roots: list[str], patterns: tuple[str, ...] | None, recursive: bool = True) -> Listing:
    """Every file under ``roots`` (each a file, directory, or URI) that ``patterns`` takes; a named file is
    always taken. A root that does not exist is an InputError naming it."""
    listing = Listing()
    seen: dict[tuple[int, int], str] = {}  # (device, inode) of directories and files -> first path
    for root in roots:
        root = absolute(root)
        if is_local(root):
            _local_root(root, patterns, recursive, listing, seen)
        else:
            _remote_root(root, patterns, recursive, listing)
    return listing


def _local_root(
    root: str, patterns: tuple[str, ...] | None, recursive: bool, listing: Listing, seen: dict[tuple[int, int], str]
) -> None:
    if os.path.isdir(root):
        _walk(root, patterns, recursive, listing, seen)
        return
    if not os.path.lexists(root):
        raise InputError(f"{root}: no such file or directory; check the input path")
    size = local_info(root).size  # a dangling link, a FIFO: a clear error
    st = os.stat(root)
    _take(root, size, (st.st_dev, st.st_ino), listing, seen)


def _take(path: str, size: int, key: tuple[int, int], listing: Listing, seen: dict[tuple[int, int], str]) -> None:
    first = seen.setdefault(key, path)
    if first != path:
        listing.repeated.append((path, first))
    else:
        listing.sizes[path] = size


def _walk(
    directory: str,
    patterns: tuple[str, ...] | None,
    recursive: bool,
    listing: Listing,
    seen: dict[tuple[int, int], str],
) -> None:
    st = os.stat(directory)
    first = seen.setdefault((st.st_dev, st.st_ino), directory)
    if first != directory:
        listing.repeated.append((directory, first))
        return
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except PermissionError:
        raise InputError(f"{directory}: permission denied; make the directory readable for this user") from None
    for entry in entries:
        path = os.path.join(directory, entry.name)
        if entry.name.startswith("."):
            listing.hidden.append(path)
            continue
        try:
            is_dir = entry.is_dir()  # follows a symbolic link
        except OSError:
            is_dir = False
        if is_dir:
            if recursive:
                _walk(path, patterns, recursive, listing, seen)
            continue
        if not matches(entry.name, patterns):
            listing.skipped.append(path)
            continue
        if not entry.is_file(follow_symlinks=False):
            local_info(path)  # a dangling link, a FIFO, a socket: a clear error (a link to a file passes)
        st = entry.stat()  # follows a link to a file
        _take(path, st.st_size, (st.st_dev, st.st_ino), listing, seen)


def _remote_root(root: str, patterns: tuple[str, ...] | None, recursive: bool, listing: Listing) -> None:
    import pyarrow.fs as pafs

    filesystem, inner = resolve(root)
    top = call(root, "info", lambda: filesystem.get_file_info(inner))
    if top.type == pafs.FileType.File:
        listing.sizes[root] = int(top.size)
        return
    if top.type == pafs.FileType.NotFound:
        if not bucket_exists(root, filesystem):
            raise permanent_error(root, "bucket", "NoSuchBucket", writing=False)
        raise InputError(f"{root}: no such object or prefix; check the URI")
    selector = pafs.FileSelector(inner, recursive=recursive, allow_not_found=True)
    infos = call(root, "list", lambda: filesystem.get_file_info(selector))
    for found in sorted(infos, key=lambda i: i.path):
        if found.type != pafs.FileType.File:
            continue
        uri = uri_of(root, found.path)
        if any(part.startswith(".") for part in relative(uri, root).split("/")):
            listing.hidden.append(uri)
        elif matches(found.base_name, patterns):
            listing.sizes[uri] = int(found.size)
        else:
            listing.skipped.append(uri)
    remember_sizes({uri: size for uri, size in listing.sizes.items() if not is_local(uri)})


def finished_files(directory: str, suffix: str) -> list[str]:
    """The finished files of one directory (no recursion) whose names end in ``suffix``, sorted: hidden names
    (writers' temporaries) left out, a directory that does not exist (yet) empty. Shuffle buckets and dedup's
    key files are listed this way. A bucket that does not exist is an InputError naming it."""
    if is_local(directory):
        try:
            names = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(os.path.join(directory, n) for n in names if n.endswith(suffix) and not n.startswith("."))
    import pyarrow.fs as pafs

    filesystem, inner = resolve(directory)
    selector = pafs.FileSelector(inner, recursive=False, allow_not_found=True)
    infos = call(directory, "list", lambda: filesystem.get_file_info(selector))
    found = sorted(
        uri_of(directory, i.path)
        for i in infos
        if i.type == pafs.FileType.File and i.base_name.endswith(suffix) and not i.base_name.startswith(".")
    )
    if not found and not bucket_exists(directory, filesystem):  # not "no files yet": a wrong URI
        raise permanent_error(directory, "bucket", "NoSuchBucket", writing=False)
    return found


def sizes_of(paths: Iterable[str]) -> dict[str, int]:
    """The size of each of ``paths`` that exists now (missing ones are left out): local files by ``stat``,
    objects by one listing of each prefix they are in (never a request per object), which also refreshes
    the sizes this process remembers."""
    out: dict[str, int] = {}
    remote: dict[str, set[str]] = {}
    for path in paths:
        if is_local(path):
            try:
                out[path] = os.stat(path).st_size
            except OSError:
                continue
        else:
            directory = path.rpartition("/")[0]
            remote.setdefault(directory, set()).add(path)
    for directory, wanted in remote.items():
        listed = _prefix_sizes(directory)
        out.update({p: listed[p] for p in wanted if p in listed})
    return out


def _prefix_sizes(directory: str) -> dict[str, int]:
    """Every object directly under ``directory`` (a URI) with its size: one listing (its pages)."""
    import pyarrow.fs as pafs

    filesystem, inner = resolve(directory)
    selector = pafs.FileSelector(inner, recursive=False, allow_not_found=True)
    infos = call(directory, "list", lambda: filesystem.get_file_info(selector))
    sizes = {uri_of(directory, i.path): int(i.size) for i in infos if i.type == pafs.FileType.File}
    remember_sizes(sizes)
    return sizes

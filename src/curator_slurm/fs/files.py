"""Reading files through the layer: sizes, kinds, whole or ranged reads, decompression by name, directories; errors
the user can act on become an InputError or OutputError naming the path and the fix."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from typing import Any, BinaryIO

from ..errors import InputError, OutputError
from .paths import is_local, resolve, scheme
from .remote import RemoteFile, bucket_exists, missing_error
from .retry import bucket_of, call, permanent_error

#: Bytes a sequential stream of an object (:func:`open_decompressed`) asks for at a time.
STREAM_READAHEAD = 8 << 20

#: Compressed endings the readers decode, lower case, each with the codec that decodes it: pyarrow's stream
#: codecs, and Python's ``lzma`` for xz (pyarrow has none). A name matches in any case (``.GZ``).
COMPRESSIONS: dict[str, str] = {
    ".gz": "gzip",
    ".gzip": "gzip",
    ".bz2": "bz2",
    ".xz": "xz",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".lz4": "lz4",
    ".br": "brotli",
}


def compression_of(path: str) -> str | None:
    """The codec of ``path`` by its ending (any case), or None for an uncompressed file."""
    lower = path.lower()
    for ending, codec in COMPRESSIONS.items():
        if lower.endswith(ending):
            return codec
    return None


@dataclass(frozen=True)
class FileInfo:
    """What the layer knows of one file: its canonical path or URI and its size in bytes."""

    path: str
    size: int


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a directory" if stat.S_ISDIR(mode) else "a special file"


def local_info(path: str) -> FileInfo:
    """The size of the regular file ``path``; a missing file, a dangling symlink or a FIFO/socket/device is an
    InputError that says which (a FIFO would otherwise read as an empty file, or block for ever)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(
                f"{path}: a symbolic link to {os.readlink(path)!r}, which does not exist; fix or remove the link"
            ) from None
        raise InputError(f"{path}: no such file; was it removed after the run started?") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied; make the file readable for this user") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: {_kind(st.st_mode)}, not a regular file; curator-slurm reads regular files only")
    return FileInfo(path, st.st_size)


#: Sizes of objects this process listed or uploaded, by URI: what :func:`info` answers without a HEAD
#: request (planning 100,000 listed objects would otherwise ask for each one's size again, one by one).
#: A listing refreshes its entries; an upload sets its own. Local files are never cached.
_KNOWN_SIZES: dict[str, int] = {}


def remember_sizes(sizes: dict[str, int]) -> None:
    """Note the sizes a listing (or an upload) of object-store URIs just gave (see :data:`_KNOWN_SIZES`)."""
    _KNOWN_SIZES.update(sizes)


def forget_size(path: str) -> None:
    _KNOWN_SIZES.pop(path, None)


def info(path: str) -> FileInfo:
    """:func:`local_info`, or the object's size for a URI: a missing object, a missing bucket or a prefix is an
    InputError that says which. An object this process listed or uploaded is answered from that listing."""
    if is_local(path):
        return local_info(path)
    known = _KNOWN_SIZES.get(path)
    if known is not None:
        return FileInfo(path, known)
    import pyarrow.fs as pafs

    filesystem, inner = resolve(path)
    found = call(path, "info", lambda: filesystem.get_file_info(inner))
    if found.type == pafs.FileType.NotFound:
        raise missing_error(path, filesystem)
    if found.type != pafs.FileType.File:
        raise InputError(f"{path}: a prefix (a directory), not an object; check the URI")
    return FileInfo(path, int(found.size))


def size(path: str) -> int:
    """The size of ``path`` in bytes (see :func:`info`)."""
    if is_local(path):
        try:
            return os.path.getsize(path)
        except OSError:
            return local_info(path).size  # the clear error
    return info(path).size


def exists(path: str) -> bool:
    if is_local(path):
        return os.path.exists(path)
    import pyarrow.fs as pafs

    filesystem, inner = resolve(path)
    return call(path, "info", lambda: filesystem.get_file_info(inner)).type != pafs.FileType.NotFound


def isdir(path: str) -> bool:
    if is_local(path):
        return os.path.isdir(path)
    import pyarrow.fs as pafs

    filesystem, inner = resolve(path)
    return call(path, "info", lambda: filesystem.get_file_info(inner)).type == pafs.FileType.Directory


def open_input(path: str) -> BinaryIO:
    """``path`` opened for reading, seekable: a local file, or for a URI a :class:`~.remote.RemoteFile` whose
    every read is one ranged request, retried on transient errors (pyarrow's readers take it as it is)."""
    if is_local(path):
        local_info(path)  # a FIFO would block open() for ever; a dangling link, no permission: say which
        try:
            return open(path, "rb")
        except PermissionError:
            raise InputError(f"{path}: permission denied; make the file readable for this user") from None
    filesystem, inner = resolve(path)
    return RemoteFile(path, filesystem, inner)  # type: ignore[return-value]


def native_source(path: str) -> Any:
    """What pyarrow's readers take for the local file ``path``: the path itself, or, for a name that is not
    UTF-8 (pyarrow encodes every ``str`` path as UTF-8 and refuses surrogate escapes), the file opened by its
    bytes as a pyarrow native file."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        import pyarrow as pa

        local_info(path)
        return pa.OSFile(os.fsencode(path))
    return path


def read_range(path: str, start: int, length: int) -> bytes:
    """``length`` bytes of ``path`` from byte ``start`` (fewer at its end): one ranged GET on object stores."""
    with open_input(path) as f:
        f.seek(start)
        return f.read(length)


def open_decompressed(path: str) -> Any:
    """A stream of ``path``'s bytes, decompressed by its ending (:data:`COMPRESSIONS`, any case). A local
    file is read by pyarrow's native stream (no Python in the loop), xz through Python's ``lzma``."""
    import pyarrow as pa

    codec = compression_of(path)
    if is_local(path):
        local_info(path)  # a FIFO would block, a dangling link say nothing useful: refuse them first
        try:
            raw = pa.input_stream(native_source(path), compression=None if codec == "xz" else codec)
        except PermissionError:
            raise InputError(f"{path}: permission denied; make the file readable for this user") from None
    else:
        filesystem, inner = resolve(path)
        raw = RemoteFile(path, filesystem, inner, readahead=STREAM_READAHEAD)
        if codec not in (None, "xz"):
            raw = pa.CompressedInputStream(raw, codec)
    if codec == "xz":
        import lzma

        return lzma.open(raw, "rb")
    return raw


def makedirs(path: str) -> None:
    """Create the directory ``path`` and its parents (object stores have none to create). A read-only
    place is an :class:`OutputError` that names it, not a traceback."""
    if not is_local(path):
        _remote_makedirs(path)
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise output_error(e, path) from e


#: Buckets this process found to exist (writers call :func:`makedirs` for every file they write).
_BUCKETS_SEEN: set[str] = set()


def _remote_makedirs(path: str) -> None:
    """An object store has no directories: S3 checks once per process that the bucket exists (an
    OutputError naming it if not); other filesystems create the directory."""
    filesystem, inner = resolve(path)
    if scheme(path) != "s3":
        call(path, "mkdir", lambda: filesystem.create_dir(inner, recursive=True), writing=True)
        return
    bucket = bucket_of(path)
    if bucket in _BUCKETS_SEEN:
        return
    if not bucket_exists(path, filesystem, writing=True):
        raise permanent_error(path, "bucket", "NoSuchBucket", writing=True)
    _BUCKETS_SEEN.add(bucket)


def remove(path: str) -> None:
    """Delete the file or object ``path``; one that does not exist is no error (a retried delete may find
    it gone). On S3, pyarrow then writes an empty marker object ``<prefix>/`` (a directory to pyarrow, which
    listings skip)."""
    if is_local(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    forget_size(path)
    filesystem, inner = resolve(path)
    with contextlib.suppress(FileNotFoundError):
        call(path, "delete", lambda: filesystem.delete_file(inner), writing=True)


def name_too_long(path: str) -> str | None:
    """Why the local ``path`` cannot exist: its first name longer than the filesystem allows for one name
    (``NAME_MAX``, in bytes: 255 on most), or the whole path longer than ``PATH_MAX``; None if neither."""
    existing = os.path.abspath(path)
    while existing not in ("", "/") and not os.path.isdir(existing):
        existing = os.path.dirname(existing)

    def limit(name: str, default: int) -> int:
        try:
            return int(os.pathconf(existing or "/", name))
        except (OSError, ValueError):
            return default

    name_max = limit("PC_NAME_MAX", 255)
    for name in os.path.abspath(path).split(os.sep):
        size = len(os.fsencode(name))
        if size > name_max:
            shown = name if len(name) <= 60 else f"{name[:28]}...{name[-28:]}"
            return (
                f"the name {shown!r} ({size} bytes) is longer than the {name_max} bytes this filesystem allows "
                f"for one name in a path; choose a shorter name"
            )
    path_max = limit("PC_PATH_MAX", 4096)
    size = len(os.fsencode(os.path.abspath(path)))
    if size >= path_max:
        return f"the path is {size} bytes, longer than the {path_max} this filesystem allows; choose a shorter path"
    return None


def check_output_dir(path: str) -> None:
    """Before any work: an :class:`OutputError` when the local directory ``path`` cannot be made, because a
    name in it is longer than the filesystem allows or a file stands where one of its directories belongs.
    What only trying can tell (permissions, space) is left to the writes; URIs are not checked."""
    if not is_local(path):
        return
    path = os.path.abspath(path)
    too_long = name_too_long(path)
    if too_long is not None:
        raise OutputError(f"{path}: cannot create it: {too_long}")
    existing = path
    while existing not in ("", "/") and not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if existing not in ("", "/") and not os.path.isdir(existing):
        what = "a file, not a directory" if existing == path else f"a file is in the way of the directory {path}"
        raise OutputError(f"{existing}: {what}; remove it or choose another output path")


def output_error(error: OSError, path: str) -> OSError:
    """An OSError met while writing ``path`` (or into it), as an :class:`OutputError` that names the place
    and the fix when the user must act (no permission, a read-only filesystem, a file where a directory
    belongs, a name too long); other errors are returned as they are (out-of-space is handled by the
    callers' own rule)."""
    where = error.filename or path
    too_long = name_too_long(os.fspath(where)) if error.errno == errno.ENAMETOOLONG else None
    if too_long is not None:
        new = OutputError(f"{os.fspath(where)}: cannot create it: {too_long}")
    elif isinstance(error, PermissionError) or error.errno == errno.EROFS:
        what = "read-only filesystem" if error.errno == errno.EROFS else "permission denied"
        new = OutputError(
            f"{where}: cannot write there ({what}); choose a writable output directory or fix its permissions"
        )
    elif isinstance(error, (FileExistsError, NotADirectoryError)):
        blocker = os.fspath(where)
        while blocker not in ("", "/") and not os.path.exists(blocker):
            blocker = os.path.dirname(blocker)
        new = OutputError(
            f"{blocker}: a file is in the way of the directory {path}; remove it or choose another output path"
        )
    else:
        return error
    new.errno = error.errno
    return new


def read_bytes(path: str) -> bytes:
    """The whole of ``path`` (small files: manifests, plans)."""
    with open_input(path) as f:
        return f.read()

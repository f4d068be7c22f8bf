"""A file of an object store opened for reading (:class:`RemoteFile`, what :func:`curator_slurm.fs.open_input`
returns for a URI): seekable, every read a retried ranged request."""

from __future__ import annotations

import io
from typing import Any

from ..errors import InputError
from .retry import bucket_of, call, permanent_error

_LINE_CHUNK = 1 << 16


def bucket_exists(uri: str, filesystem: Any, writing: bool = False) -> bool:
    """Whether the bucket of the S3 URI ``uri`` exists (one HEAD, retried); True for other schemes."""
    import pyarrow.fs as pafs

    if not uri.startswith("s3://"):
        return True
    found = call(uri, "bucket", lambda: filesystem.get_file_info(bucket_of(uri)), writing=writing)
    return found.type != pafs.FileType.NotFound


def missing_error(uri: str, filesystem: Any, writing: bool = False) -> Exception:
    """The error for an object pyarrow did not find: a bucket that does not exist is said so (S3 answers a
    HEAD in a missing bucket with a bare 404), otherwise the object is missing."""
    if not bucket_exists(uri, filesystem, writing):
        return permanent_error(uri, "bucket", "NoSuchBucket", writing)
    return permanent_error(uri, "key", "NoSuchKey", writing)


class RemoteFile:
    """A read-only, seekable file of an object. pyarrow's readers take it as a Python file and read it through
    ``read_buffer``, without a copy; Python readers use ``read``, ``readline`` and ``readinto``. A read that fails
    with a transient error opens the object again and asks for the same range; an object whose size changed
    meanwhile, or that is gone, is an :class:`~curator_slurm.errors.InputError`. Not for concurrent use by several
    threads (pyarrow serialises its own calls).

    Args:
        uri: the object's URI, its name in messages.
        filesystem: the ``pyarrow.fs`` filesystem that serves it.
        inner: the object's path inside ``filesystem``.
        readahead: with more than 0 (sequential streams), small reads are served from one ranged request of
            this many bytes.
    """

    mode = "rb"

    def __init__(self, uri: str, filesystem: Any, inner: str, readahead: int = 0) -> None:
        self.name = uri
        self._filesystem, self._inner, self._readahead = filesystem, inner, readahead
        self._native: Any = self._open()
        self._size = int(self._native.size())
        self._pos = 0
        self._buffer: Any = None
        self._buffer_at = 0
        self._closed = False

    def _open(self) -> Any:
        try:
            return call(self.name, "open", lambda: self._filesystem.open_input_file(self._inner))
        except FileNotFoundError:
            raise missing_error(self.name, self._filesystem) from None

    def _fetch(self, at: int, length: int, as_bytes: bool = False) -> Any:
        """``length`` bytes from ``at`` (fewer at the end) as a ``pyarrow.Buffer`` (``bytes`` with ``as_bytes``:
        read straight into them, no second copy): one ranged request, retried."""
        import pyarrow as pa

        want = max(0, min(length, self._size - at))
        if want == 0:
            return b"" if as_bytes else pa.py_buffer(b"")

        def attempt() -> Any:
            if self._native is None:  # the last attempt failed: open again, the object may have changed
                native = self._filesystem.open_input_file(self._inner)
                if native.size() != self._size:
                    raise InputError(
                        f"{self.name}: its size changed from {self._size} to {native.size()} bytes while it was "
                        "being read; do not overwrite inputs during a run"
                    )
                self._native = native
            try:
                self._native.seek(at)
                data = self._native.read(want) if as_bytes else self._native.read_buffer(want)
            except BaseException:
                self._native = None
                raise
            if len(data) != want:
                self._native = None
                raise OSError(f"short read: {len(data)} of {want} bytes at offset {at}")
            return data

        try:
            return call(self.name, "read", attempt)
        except FileNotFoundError:
            raise missing_error(self.name, self._filesystem) from None

    def read_buffer(self, size: int | None = -1) -> Any:
        """The next ``size`` bytes (all that is left for None or a negative size) as a ``pyarrow.Buffer``."""
        return self._read(size, as_bytes=False)

    def read(self, size: int | None = -1) -> bytes:
        """The next ``size`` bytes (all that is left for None or a negative size)."""
        return self._read(size, as_bytes=True)

    def _read(self, size: int | None, as_bytes: bool) -> Any:
        self._check()
        left = self._size - self._pos
        n = left if size is None or size < 0 else min(size, left)
        if not self._readahead or n >= self._readahead:
            data = self._fetch(self._pos, n, as_bytes)
            self._pos += len(data)
            return data
        parts = []
        while n > 0:
            if self._buffer is None or not self._buffer_at <= self._pos < self._buffer_at + self._buffer.size:
                self._buffer, self._buffer_at = self._fetch(self._pos, self._readahead), self._pos
            offset = self._pos - self._buffer_at
            piece = self._buffer.slice(offset, min(n, self._buffer.size - offset))
            parts.append(piece)
            self._pos += piece.size
            n -= piece.size
        if as_bytes:
            return b"".join(p.to_pybytes() for p in parts)
        if len(parts) == 1:
            return parts[0]
        import pyarrow as pa

        return pa.py_buffer(b"".join(p.to_pybytes() for p in parts))

    def readinto(self, target: Any) -> int:
        view = memoryview(target).cast("B")
        data = self.read_buffer(len(view))
        view[: data.size] = memoryview(data)
        return int(data.size)

    def readline(self, size: int | None = -1) -> bytes:
        """The rest of the line at the current position, its newline included (at most ``size`` bytes)."""
        start, parts, total = self._pos, [], 0
        limit = None if size is None or size < 0 else size
        while limit is None or total < limit:
            chunk = self.read(_LINE_CHUNK if limit is None else min(_LINE_CHUNK, limit - total))
            if not chunk:
                break
            cut = chunk.find(b"\n")
            if cut >= 0:
                parts.append(chunk[: cut + 1])
                break
            parts.append(chunk)
            total += len(chunk)
        line = b"".join(parts)
        self._pos = start + len(line)
        return line

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check()
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError(f"{self.name}: seek to {base + offset}, before the start of the file")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        self._check()
        return self._pos

    def size(self) -> int:
        return self._size

    def _check(self) -> None:
        if self._closed:
            raise ValueError(f"{self.name}: I/O operation on a closed file")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if not self._closed:
            self._closed, self._buffer = True, None
            if self._native is not None:
                self._native.close()
                self._native = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise io.UnsupportedOperation(f"{self.name}: an object in an object store has no file descriptor")

    def __enter__(self) -> RemoteFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RemoteFile {self.name} size={self._size} at={self._pos}>"

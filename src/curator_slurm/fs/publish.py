"""Publishing a finished file atomically (a temporary name and a rename; one whole-object write on an object store),
and removing what a killed writer on this host left half-written. Design: docs/design.md, "Files and object
storage"; the temporary name: docs/reference.md."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ..errors import is_out_of_space, out_of_space
from .files import forget_size, output_error, remember_sizes
from .paths import is_local, resolve
from .retry import call

#: What every temporary name holds after the final name (tests and cleanup look for it).
TMP_MARK = ".tmp-"

_TEMP = re.compile(
    r"^\.(?P<final>.+)\.tmp-(?P<pid>\d+)-(?P<rand>[0-9a-f]{8})(?:-(?P<start>\d+)-(?P<boot>[0-9a-f]{8})@(?P<host>.+))?$"
)


def _host() -> str:
    import socket  # on first use: array tasks that write nothing do not pay for it

    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "localhost"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip().replace("-", "")[:8]
    except OSError:
        return "00000000"


def _start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot, field 22 of ``/proc/<pid>/stat``), None if
    there is no such process (or no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()  # the command name may hold spaces and parentheses
    return int(fields[19]) if len(fields) > 19 else None


_TOKEN: tuple[int, str] | None = None


def writer_token() -> str:
    """``<pid>`` and, after the random part, ``<start>-<boot>@<host>`` for this process (recomputed after a fork)."""
    global _TOKEN
    pid = os.getpid()
    if _TOKEN is None or _TOKEN[0] != pid:
        _TOKEN = (pid, f"{_start_time(pid) or 0}-{_boot_id()}@{_host()}")
    return _TOKEN[1]


def temp_name(final_name: str) -> str:
    """The hidden temporary name under which this process writes ``final_name``:
    ``.<final name>.tmp-<pid>-<8 hex>-<start>-<boot>@<host>`` (docs/reference.md, "Atomic publish")."""
    return f".{final_name}{TMP_MARK}{os.getpid()}-{os.urandom(4).hex()}-{writer_token()}"


def atomic_write(final_path: str, write: Callable[[BinaryIO], Any], sync: bool = True) -> int:
    """Call ``write(binary_file)`` and publish what it wrote as ``final_path``, whole or not at all; returns the
    bytes published.

    Locally: a hidden temporary file in the same directory, fsynced (unless ``sync`` is False: the caller
    makes it durable later, e.g. a run ledger for a window of tasks), renamed to ``final_path``; on any
    error it is removed. A full disk, a read-only directory or no permission is an error naming the place.
    On an object store: the bytes are spooled to a local temporary file, then uploaded as one object whose
    upload completes only at its end, so no object appears half written under ``final_path``."""
    if not is_local(final_path):
        return _write_object(final_path, write)
    directory, name = os.path.split(final_path)
    tmp = os.path.join(directory, temp_name(name))
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            size = os.fstat(f.fileno()).st_size
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, final_path)
        return size
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if is_out_of_space(e):  # a full disk is not a crash: say where and what to do
            raise out_of_space(e, os.path.abspath(directory or ".")) from e  # type: ignore[arg-type]
        if isinstance(e, OSError) and output_error(e, final_path) is not e:
            raise output_error(e, os.path.abspath(directory or ".")) from e
        raise


class AtomicFile:
    """A file written in pieces and published whole, or not at all: locally under a hidden temporary name
    (:func:`temp_name` of ``provisional``'s name, in its directory) renamed at :meth:`publish`; for an object
    store, a local spool uploaded as one object at :meth:`publish`. :meth:`discard` drops it.

    Args:
        provisional: the path it is meant for (its directory is where the temporary file lies, locally).
    """

    def __init__(self, provisional: str) -> None:
        self.local = is_local(provisional)
        self.directory, name = os.path.split(provisional)
        if self.local:
            self.tmp = os.path.join(self.directory, temp_name(name))
            try:
                self.file: BinaryIO = open(self.tmp, "wb")  # noqa: SIM115 - closed by publish() or discard()
            except OSError as e:
                raise _write_error(e, self.directory, provisional) from e
        else:
            import tempfile

            self.tmp = ""
            self.file = tempfile.NamedTemporaryFile(prefix="curator-upload-")  # type: ignore[assignment]  # noqa: SIM115

    def size(self) -> int:
        """Bytes written so far (what reached the file: flush a buffering stream first)."""
        return self.file.tell()

    def publish(self, final_path: str, sync: bool = True) -> int:
        """Publish what was written as ``final_path`` (locally, in this file's directory or one below it); returns
        its bytes. ``sync`` False leaves the fsync to the caller (a run ledger)."""
        try:
            self.file.flush()
            size = os.fstat(self.file.fileno()).st_size
            if not self.local:
                with self.file as spool:
                    return _upload_spool(final_path, spool)
            if sync:
                os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.tmp, final_path)
            return size
        except BaseException as e:
            self.discard()
            if isinstance(e, OSError):
                raise _write_error(e, self.directory, final_path) from e
            raise

    def discard(self) -> None:
        """Drop what was written (nothing is published); safe to call more than once."""
        with contextlib.suppress(OSError):
            self.file.close()
        if self.local:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)


def _write_error(e: OSError, directory: str, final_path: str) -> BaseException:
    """An OSError met while writing ``final_path``, as the error that names the place (and the fix)."""
    if is_out_of_space(e):
        return out_of_space(e, os.path.abspath(directory or "."))
    clear = output_error(e, final_path)
    return output_error(e, os.path.abspath(directory or ".")) if clear is not e else e


def atomic_write_text(final_path: str, text: str, sync: bool = True) -> None:
    """:func:`atomic_write` of UTF-8 text."""
    data = text.encode("utf-8")
    atomic_write(final_path, lambda f: f.write(data), sync=sync)


def _write_object(uri: str, write: Callable[[BinaryIO], Any]) -> int:
    """``write`` into a local spool file, then the spool uploaded as the object ``uri`` (retried whole on
    transient errors, :func:`.retry.call`)."""
    import tempfile

    with tempfile.NamedTemporaryFile(prefix="curator-upload-") as spool:
        write(spool.file)  # type: ignore[arg-type]
        return _upload_spool(uri, spool)


def _upload_spool(uri: str, spool: Any) -> int:
    """The local file ``spool`` (a named temporary file) uploaded as the object ``uri``; its bytes."""
    import pyarrow as pa

    filesystem, inner = resolve(uri)
    spool.file.flush()
    size = os.fstat(spool.fileno()).st_size
    data = pa.memory_map(spool.name).read_buffer() if size else pa.py_buffer(b"")  # no copy in memory
    forget_size(uri)
    call(uri, "upload", lambda: _upload(filesystem, inner, data), writing=True)
    remember_sizes({uri: size})
    return size


def _upload(filesystem: Any, inner: str, data: Any) -> None:
    """One attempt at uploading ``data`` as ``inner``. The bytes go in one call, so nothing in Python (a
    signal's exception) can stop it between the first and the last byte: pyarrow completes an upload when its
    stream is closed, even one left halfway, and has no abort. If something still stops it (before the
    write), what the close published is deleted."""
    try:
        stream = filesystem.open_output_stream(inner, compression=None)  # bytes as they are: no gzip by name
    except FileNotFoundError:  # a filesystem with real directories (object stores have none to make)
        filesystem.create_dir(inner.rpartition("/")[0], recursive=True)
        stream = filesystem.open_output_stream(inner, compression=None)  # bytes as they are: no gzip by name
    try:
        stream.write(data)
    except BaseException:
        _abandon(filesystem, inner, stream)
        raise
    stream.close()


def _abandon(filesystem: Any, inner: str, stream: Any) -> None:
    try:
        stream.close()
    except Exception:  # the store refused the upload: nothing was published
        return
    with contextlib.suppress(Exception):  # the close published part of the object: take it back
        filesystem.delete_file(inner)


@dataclass(frozen=True)
class Cleanup:
    """What :func:`remove_dead_temporaries` did in one directory: names removed, and names left because their
    writer is on another host (or wrote before names said who) or still alive here."""

    directory: str
    removed: list[str] = field(default_factory=list)
    other_hosts: list[str] = field(default_factory=list)
    alive: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = [f"removed {len(self.removed)} temporary file(s) of dead writers in {self.directory}"]
        if self.other_hosts:
            parts.append(
                f"left {len(self.other_hosts)} of writers on other hosts or of unknown writers "
                f"(remove them by hand once no run writes there): {', '.join(self.other_hosts[:5])}"
            )
        if self.alive:
            parts.append(f"left {len(self.alive)} of live writers")
        return "; ".join(parts)


def _writer_gone(pid: int, start: int, boot: str) -> bool:
    """Whether the writer (``pid``, started at ``start`` in the boot ``boot``) on this host is gone."""
    if boot != _boot_id():
        return True
    now = _start_time(pid)
    if now is not None:
        return now != start
    if os.path.isdir("/proc"):
        return True
    try:  # no /proc (not Linux): the pid alone says it
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def remove_dead_temporaries(directory: str) -> Cleanup:
    """Delete the temporary files that writers on this host which are gone (killed while writing) left in
    ``directory``; leave those of live writers and of other hosts. Object stores have none (nothing is
    written under a temporary name there)."""
    result = Cleanup(directory)
    if not is_local(directory):
        return result
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(".") and TMP_MARK in n)
    except (FileNotFoundError, NotADirectoryError):
        return result
    host = _host()
    for name in names:
        match = _TEMP.match(name)
        if match is None:
            continue
        if match["host"] is None or match["host"] != host:
            result.other_hosts.append(name)
        elif _writer_gone(int(match["pid"]), int(match["start"]), match["boot"]):
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                continue
            result.removed.append(name)
        else:
            result.alive.append(name)
    return result


def remove_temporaries(directory: str, pids: Collection[int]) -> list[str]:
    """Delete the temporary files that processes ``pids`` of this host (killed workers of this process)
    left in ``directory``; return their names. Nothing else is touched."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    host, removed = _host(), []
    for name in names:
        match = _TEMP.match(name)
        if match is None or int(match["pid"]) not in pids or match["host"] not in (None, host):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            continue
        removed.append(name)
    return removed

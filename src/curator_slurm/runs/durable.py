"""Making files durable together: one ``syncfs`` per filesystem where the kernel reports write-back errors
through it (Linux >= 5.8), else an fsync of each file and directory. The ledger's group commit calls this
before it records a window of source tasks done."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Any

from curator_slurm import fs


def best_sync_method() -> str:
    """``syncfs`` where it reports write-back errors (Linux >= 5.8), else ``fsync``."""
    if not sys.platform.startswith("linux"):
        return "fsync"
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return "fsync"
    return "syncfs" if (major, minor) >= (5, 8) else "fsync"


_libc: Any = None


def syncfs(fd: int) -> None:
    """``syncfs(2)``: write back everything dirty on the filesystem that holds ``fd``, and wait for it."""
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(_libc, "syncfs", None)
    if call is None:  # a C library without it
        raise OSError(errno.ENOSYS, "syncfs: not in this C library")
    if call(fd) != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"syncfs: {os.strerror(err)}")


def make_durable(paths: Sequence[str], method: str = "fsync") -> None:
    """Make the files ``paths`` (already renamed into place) and their names durable.

    ``fsync``: an fsync of each file (on a fresh descriptor, which flushes the file's dirty pages whoever
    wrote them on this node) and of each directory. ``syncfs``: one ``syncfs`` per filesystem the files
    are on, which writes back the files and the directory entries together, far cheaper for many small
    files (but it also waits for anything else dirty on that filesystem). Objects on a store (URIs) are
    durable once their write completed, so only local paths are synced."""
    paths = [p for p in paths if fs.is_local(p)]
    if not paths:
        return
    directories = sorted({os.path.dirname(os.path.abspath(p)) for p in paths})
    if method == "syncfs":
        devices: set[int] = set()
        for directory in directories:
            fd = os.open(directory, os.O_RDONLY)
            try:
                device = os.fstat(fd).st_dev
                if device not in devices:
                    devices.add(device)
                    syncfs(fd)
            except OSError as e:
                if e.errno not in (errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                method = "fsync"  # no syncfs here after all: each file on its own
                break
            finally:
                os.close(fd)
        if method == "syncfs":
            return
    for path in [*paths, *directories]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

"""How LocalExecutor's worker processes start: forked when that is safe (no other thread in the driver that could
hold a lock across the fork), else spawned. Design: docs/design.md, "Executors"."""

from __future__ import annotations

import os
import sys

#: Threads whose library makes them safe across fork (pthread_atfork handlers stop them in the parent
#: and restart them in the child): jemalloc's background purging thread, which importing pyarrow starts.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def choose_start_method() -> tuple[str, str]:
    """``("fork", why)`` when forking this process is safe, else ``("spawn", why)``.

    A fork copies only the calling thread: a lock that another thread held at that moment (a logging
    queue, a client library's event loop, a thread pool at work) stays locked in the child forever.
    So fork only on Linux (macOS forbids it for system frameworks) and only while this process has no
    thread but the calling one, counted by the kernel (``/proc/self/task``) so that native threads
    count too, apart from :data:`FORK_SAFE_THREADS`. OpenBLAS's idle pool (numpy's, started when pyarrow
    imports numpy before this package could ask for one BLAS thread) is stopped first, as OpenBLAS's own
    fork handler would stop it: the next BLAS call starts it again.
    """
    if not sys.platform.startswith("linux"):
        return "spawn", f"fork is not safe on {sys.platform}"
    stop_openblas_threads()
    try:
        names = []
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as comm:
                names.append(comm.read().strip())
    except OSError:  # a thread that ended while being listed counts as a reason for caution too
        return "spawn", "cannot list this process's threads (/proc/self/task)"
    others = [n for n in names if n not in FORK_SAFE_THREADS]
    if len(others) > 1:
        why = f"this process runs {len(others)} threads; forking it could copy a lock one of them holds"
        if "numpy" in sys.modules:  # pyarrow imports numpy when it is installed
            why += " (numpy is loaded: for an MKL or second BLAS, set OMP_NUM_THREADS=1 or OPENBLAS_NUM_THREADS=1)"
        return "spawn", why
    return "fork", "this process runs no other thread"


def stop_openblas_threads() -> int:
    """Stop the worker threads of every OpenBLAS loaded in this process (numpy's wheels bundle one), as the
    ``pthread_atfork`` handler OpenBLAS registers does before any fork; returns how many libraries were told.

    Only while no other Python thread runs (one could be inside a BLAS call). The pool is idle then, since
    only this thread could have used it, and OpenBLAS starts it again on its next parallel call."""
    import threading

    if threading.active_count() > 1 or "numpy" not in sys.modules:
        return 0
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:
        return 0
    import ctypes

    stopped = 0
    for path in sorted(paths):
        try:
            shutdown = ctypes.CDLL(path).blas_thread_shutdown_  # already loaded: dlopen only finds it
        except (OSError, AttributeError):  # not a shared library after all, or an OpenBLAS without the symbol
            continue
        shutdown()
        stopped += 1
    return stopped


def settled_start_method(timeout: float = 2.0) -> tuple[str, str]:
    """:func:`choose_start_method` once the threads of a pool just shut down have left the kernel's
    list too: ``join()`` returns a moment before a thread's last trace in ``/proc/self/task`` goes."""
    import threading
    import time

    deadline = time.monotonic() + timeout
    while True:
        method, why = choose_start_method()
        if method == "fork" or threading.active_count() > 1 or time.monotonic() > deadline:
            return method, why
        time.sleep(0.01)


__all__ = ["FORK_SAFE_THREADS", "choose_start_method", "settled_start_method", "stop_openblas_threads"]

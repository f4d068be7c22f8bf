"""Whether what the ledger says was written (``written``: each output's path and size) is still there: for
`status --verify`, and for a re-run that does again a source task whose outputs are gone."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from curator_slurm import fs
from curator_slurm.runs.inputs import FileStates, done_records, stat_files


def written_files(outputs: Iterable[str], sizes: Mapping[str, int] | None = None) -> FileStates:
    """What a done record keeps of ``outputs``: each one's path, size and modification time now for local
    files (``stat``), and for objects the size their writer published (``sizes``; no request: the object
    store gives no modification time the next start could compare)."""
    sizes = sizes or {}
    out: FileStates = {"paths": [], "sizes": [], "mtimes": []}
    for path in outputs:
        name, mtime = path, None
        if fs.is_local(path):
            try:
                st = os.stat(os.path.abspath(path))
            except OSError:
                continue
            name, size, mtime = os.path.abspath(path), st.st_size, st.st_mtime_ns
        elif path in sizes:
            size = int(sizes[path])
        else:
            continue
        out["paths"].append(name)
        out["sizes"].append(size)
        out["mtimes"].append(mtime)
    return out


def lost_outputs(run_dir: str, sources: set[str] | None = None, shard: Any = None) -> dict[str, list[str]]:
    """For each done source task of ``run_dir`` (of ``sources``, default all; with ``shard``, read from its
    ledger files only) whose recorded outputs are gone or have another size now: what is wrong with each,
    naming the file. Local files are looked at one by one, objects by one listing per prefix."""
    return lost_of(done_records(run_dir, sources, shard))


def lost_of(records: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """:func:`lost_outputs` of the done ``records`` given (source -> its latest done record)."""
    recorded: list[tuple[str, str, int, int | None]] = []
    for source, record in records.items():
        for path, size, mtime in recorded_files(record):
            if size is not None:
                recorded.append((source, path, size, mtime))
    found = changed_files((path, size, mtime) for _, path, size, mtime in recorded)
    problems: dict[str, list[str]] = {}
    for source, path, _, _ in recorded:
        if path in found:
            problems.setdefault(source, []).append(f"{path}: {found[path]}")
    return problems


def recorded_files(record: Mapping[str, Any]) -> list[tuple[str, int | None, int | None]]:
    """What a done ``record`` says it wrote: each output's path, size and modification time (None where the
    record kept none: an object, a record written before they were kept); damaged entries are left out."""
    written = record.get("written") if isinstance(record.get("written"), Mapping) else {}
    paths, sizes, mtimes = (_list(written.get(k)) for k in ("paths", "sizes", "mtimes"))
    out: list[tuple[str, int | None, int | None]] = []
    for i, path in enumerate(paths):
        size, mtime = sizes[i] if i < len(sizes) else None, mtimes[i] if i < len(mtimes) else None
        if isinstance(path, str):
            out.append((path, _int(size), _int(mtime)))
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def changed_files(files: Iterable[tuple[str, int | None, int | None]]) -> dict[str, str]:
    """Of ``files`` (path, recorded size, recorded modification time in ns: each None where not recorded), those
    gone or changed now, each with a phrase saying how. A local file is compared by size and modification time
    (one ``stat``, as for its size alone): a rewrite at the same size changes its modification time. An
    object by its size (one listing per prefix)."""
    files = list(files)
    local = stat_files(p for p, _, _ in files if fs.is_local(p))
    remote = fs.sizes_of(p for p, _, _ in files if not fs.is_local(p))
    out: dict[str, str] = {}
    for path, size, mtime in files:
        now = local.get(path) if fs.is_local(path) else ((remote[path], None) if path in remote else None)
        if now is None:
            out[path] = "missing"
        elif size is not None and now[0] != size:
            out[path] = f"is {now[0]} bytes, was {size} when recorded"
        elif mtime is not None and now[1] is not None and now[1] != mtime:
            out[path] = f"rewritten since it was recorded (same size, {now[0]} bytes, another modification time)"
    return out


def verify_run(run_dir: str) -> dict[str, Any]:
    """What `status --verify` adds: the done source tasks whose outputs are lost (``lost_outputs``: source
    → problems), the inputs that changed since the done tasks read them (``changed_inputs``), the outputs of
    earlier phases this one reads that are gone or changed (``upstream_problems``), and the done tasks whose
    reading of an earlier phase was recorded again since (``stale``: they are done again)."""
    from curator_slurm.runs import upstream
    from curator_slurm.runs.inputs import changes, recorded_inputs

    records = done_records(run_dir)
    read = recorded_inputs(run_dir)
    upstreams = upstream.load(run_dir)
    return {
        "lost_outputs": lost_of(records),
        "changed_inputs": changes(read, stat_files(read)),
        "upstream_problems": [p for u in upstreams for p in upstream.problems(u)],
        "stale": sorted(upstream.stale(upstreams, records)),
    }


def outstanding(run_dir: str, task_ids: Iterable[str]) -> list[str]:
    """Of ``task_ids`` (a run's planned source tasks), those that a retry must do: not done, done with lost
    outputs, or done from outputs of an earlier phase that were recorded again since (stale)."""
    from curator_slurm.runs import upstream
    from curator_slurm.runs.ledger import load_status

    ids = list(task_ids)
    done = load_status(run_dir).done if os.path.isdir(run_dir) else set()
    records = done_records(run_dir, {t for t in ids if t in done})
    redo = set(lost_of(records)) | upstream.stale(upstream.load(run_dir), records)
    return [t for t in ids if t not in done or t in redo]


def verify_problems(verified: Mapping[str, Any] | None) -> bool:
    """Whether what :func:`verify_run` found means the run is not complete."""
    return verified is not None and any(
        verified.get(k) for k in ("lost_outputs", "changed_inputs", "upstream_problems", "stale")
    )


__all__ = [
    "changed_files",
    "lost_of",
    "lost_outputs",
    "outstanding",
    "recorded_files",
    "verify_problems",
    "verify_run",
    "written_files",
]

"""Whether what the ledger says was written (``written``: each output's path and size) is still there: for
`status --verify`, and for a re-run that does again a source task whose outputs are gone."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from curator_slurm import fs
from curator_slurm.runs.inputs import FileStates, changed_files, done_records, file_states, stat_files


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
    return file_states(record, "written")


def verify_run(run_dir: str) -> dict[str, Any]:
    """What `status --verify` adds: the done source tasks whose outputs are lost (``lost_outputs``: source
    → problems), the inputs that changed since the done tasks read them (``changed_inputs``), the outputs of
    earlier phases this one reads that are gone or changed (``upstream_problems``), the done tasks whose
    reading of an earlier phase was recorded again since (``stale``: they are done again), and the damaged
    ledger records skipped (``damaged_records``: not a problem by itself: a task whose only done record is damaged
    counts as not done, and is done again). Done tasks that the run's current listing does not hold (inputs
    removed since, or records copied from another run) are left out of these, and the outputs they recorded
    that are still there are listed (``unlisted_outputs``): nothing of the run accounts for them."""
    from curator_slurm.runs import upstream
    from curator_slurm.runs.inputs import changes
    from curator_slurm.runs.ledger import damaged_records

    records = done_records(run_dir)
    unlisted = unlisted_sources(run_dir, records)
    unlisted_files = [p for s in unlisted for p, _, _ in recorded_files(records[s])]
    leftover = sorted(set(unlisted_files) - set(changed_files((p, None, None) for p in unlisted_files)))
    records = {s: r for s, r in records.items() if s not in unlisted}
    read = {p: (size, mtime) for r in records.values() for p, size, mtime in file_states(r, "inputs")
            if size is not None and mtime is not None}  # fmt: skip
    upstreams = upstream.load(run_dir)
    return {
        "damaged_records": damaged_records(run_dir),  # met while reading the records above
        "unlisted_outputs": leftover,
        "lost_outputs": lost_of(records),
        "changed_inputs": changes(read, stat_files(read)),
        "upstream_problems": [p for u in upstreams for p in upstream.problems(u)],
        "stale": sorted(upstream.stale(upstreams, records)),
    }


def unlisted_sources(run_dir: str, records: Mapping[str, Any]) -> set[str]:
    """Of the done ``records``' sources, those that the run's current listing (``sources/<digest>.ids``) does
    not hold; none when the run kept no listing."""
    from curator_slurm.runs.rundir import current_source_ids, id_hashes

    current = current_source_ids(run_dir)
    if current is None or not records:
        return set()
    ids = list(records)
    listed = np.isin(id_hashes(ids), current)
    return {i for i, ok in zip(ids, listed, strict=True) if not ok}


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
        verified.get(k) for k in ("lost_outputs", "changed_inputs", "upstream_problems", "stale", "unlisted_outputs")
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

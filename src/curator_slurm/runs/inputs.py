"""What each source task was computed from (size and mtime of every local file it read), and the checks that refuse
an input changed under done work. Design: docs/design.md, "Inputs that change under a run"."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

import pyarrow as pa
import pyarrow.json as pj

from curator_slurm import fs
from curator_slurm.errors import RunDirError
from curator_slurm.runs.layout import is_workflow_root
from curator_slurm.runs.ledger import complete_lines, ledger_files, parse_lines
from curator_slurm.tasks import Origin

#: (size, mtime_ns) of each file, by absolute path.
Stats = dict[str, tuple[int, int]]


class FileStates(TypedDict):
    """Files as a done record keeps them (``inputs``, ``written``): parallel lists of each file's path, size
    and modification time in nanoseconds (None for an object, whose store gives none to compare)."""

    paths: list[str]
    sizes: list[int]
    mtimes: list[int | None]


_FILES = pa.struct(
    [("paths", pa.list_(pa.string())), ("sizes", pa.list_(pa.int64())), ("mtimes", pa.list_(pa.int64()))]
)
#: The columns of a ledger record read here (the rest is not parsed): what a done task read and wrote.
_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("status", pa.string()),
        ("time", pa.float64()),
        ("outputs", pa.list_(pa.string())),
        ("upstream", pa.string()),
        ("positions", pa.string()),
        ("inputs", _FILES),
        ("written", _FILES),
    ]
)


class InputsChangedError(RunDirError):
    """An input file changed (or went) since a run (or the phase of a workflow before) read it."""


def position_base(task: Any) -> str | None:
    """Where a source task's documents sit among all inputs (its files' places in the sorted listing, or its
    place among an earlier phase's tasks), as its done record keeps it; None when its documents have none."""
    origin = Origin.of(task.metadata or {})
    indices, upstream = origin.file_indices, origin.upstream_index
    if indices is None and upstream is None:
        return None
    return json.dumps([None if indices is None else list(indices), upstream], separators=(",", ":"))


def task_files(tasks: Iterable[Any]) -> list[str]:
    """The local files that the source tasks ``tasks`` read (the ``data`` of file groups), each once."""
    files: set[str] = set()
    for t in tasks:
        data = getattr(t, "data", None)
        if isinstance(data, list):
            files.update(os.path.abspath(p) for p in data if isinstance(p, str) and "://" not in p)
    return sorted(files)


def stat_files(paths: Iterable[str]) -> Stats:
    """(size, mtime_ns) of each of ``paths`` that exists."""
    out: Stats = {}
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        out[p] = (st.st_size, st.st_mtime_ns)
    return out


def input_states(tasks: Iterable[Any]) -> dict[str, FileStates]:
    """For each source task (by id), what its done record keeps of the files it reads: their paths, sizes
    and modification times now (before it is processed)."""
    out: dict[str, FileStates] = {}
    for t in tasks:
        stats = stat_files(task_files([t]))
        out[t.task_id] = {
            "paths": list(stats),
            "sizes": [s for s, _ in stats.values()],
            "mtimes": [m for _, m in stats.values()],
        }
    return out


def file_states(record: Mapping[str, Any], key: str) -> list[tuple[str, int | None, int | None]]:
    """The files a done ``record`` keeps under ``key`` (``inputs``, ``written``): each one's path, size and
    modification time, None where it kept none (an object; a record of an older version); entries of the
    wrong type (a damaged record) are left out."""
    kept = record.get(key)
    if not isinstance(kept, Mapping) or not isinstance(kept.get("paths"), list):
        return []
    paths = kept["paths"]
    sizes, mtimes = (_padded(kept.get(k), len(paths)) for k in ("sizes", "mtimes"))
    return [
        (p, s if type(s) is int else None, m if type(m) is int else None)  # not a bool, a float, a string
        for p, s, m in zip(paths, sizes, mtimes, strict=False)
        if type(p) is str
    ]


def _padded(column: Any, length: int) -> list[Any]:
    """``column`` (a record's list) padded with None to ``length``; all None when it is not a list."""
    return column + [None] * (length - len(column)) if isinstance(column, list) else [None] * length


def changed_files(files: Iterable[tuple[str, int | None, int | None]]) -> dict[str, str]:
    """Of ``files`` (path, recorded size, recorded modification time in ns: each None where not recorded), those
    gone or changed now, each with a phrase saying how. A local file is compared by size and modification time
    (one ``stat``, as for its size alone): a rewrite at the same size changes its modification time. An
    object by its size (one listing per prefix)."""
    files = list(files)
    remote = [p for p, _, _ in files if "://" in p and not fs.is_local(p)]
    now_of: dict[str, tuple[int, int | None]] = {p: (size, None) for p, size in fs.sizes_of(remote).items()}
    now_of.update(stat_files(p for p, _, _ in files if "://" not in p or fs.is_local(p)))
    out: dict[str, str] = {}
    for path, size, mtime in files:
        now = now_of.get(path)
        if now is None:
            out[path] = "missing"
        elif size is not None and now[0] != size:
            out[path] = f"is {now[0]} bytes, was {size} when recorded"
        elif mtime is not None and now[1] is not None and now[1] != mtime:
            out[path] = f"rewritten since it was recorded (same size, {now[0]} bytes, another modification time)"
    return out


def recorded_inputs(run_dir: str, sources: set[str] | None = None, shard: Any = None) -> Stats:
    """The files that the done source tasks of ``run_dir`` (those in ``sources``, default all; with
    ``shard``, read from its ledger files only) were computed from, each with the size and time of the
    last done record that names it."""
    out: Stats = {}
    for record in done_records(run_dir, sources, shard).values():
        for p, size, mtime in file_states(record, "inputs"):
            if size is not None and mtime is not None:
                out[p] = (size, mtime)
    return out


def done_records(run_dir: str, sources: set[str] | None = None, shard: Any = None) -> dict[str, dict[str, Any]]:
    """The latest done record (by its ``time``) of each done source task of ``run_dir`` (of those in
    ``sources``, default all), with only its ``time``, ``outputs``, ``upstream``, ``inputs`` and ``written``
    parsed: when it was recorded, what it read, and what it wrote (absolute paths and sizes). Records written
    before these were kept lack them. With ``shard`` (a ``ShardSpec``) only the ledger files that may hold its
    tasks' records are read, as ``load_status`` does."""
    out: dict[str, dict[str, Any]] = {}
    if not os.path.isdir(run_dir) or (sources is not None and not sources):
        return out
    for name in ledger_files(run_dir, shard, sources if shard is not None else None):
        for record in _done_rows(name):
            source = record["source"]
            if sources is not None and source not in sources:
                continue
            have = out.get(source)
            if have is None or (record.get("time") or 0.0) >= (have.get("time") or 0.0):
                out[source] = record
    return out


def _done_rows(path: str) -> list[dict[str, Any]]:
    """The done records of one ledger file (only the columns of :data:`_SCHEMA`)."""
    data = complete_lines(path)
    if b'"done"' not in data:
        return []
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=False),
            parse_options=pj.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore"),
        )
        rows = table.to_pylist()
    except pa.ArrowInvalid:  # a damaged line in the middle: record by record
        rows = parse_lines(path, data)
    return [r for r in rows if r.get("status") == "done" and isinstance(r.get("source"), str) and r["source"]]


def changes(recorded: Mapping[str, tuple[int, int]], now: Stats, paths: Iterable[str] | None = None) -> list[str]:
    """What changed in each of ``paths`` (default: every recorded file) that the record holds: one phrase
    per file, naming it."""
    out = []
    for p in sorted(recorded if paths is None else (q for q in paths if q in recorded)):
        size, mtime = recorded[p]
        if p not in now:
            out.append(f"{p}: no longer exists (it was {size} bytes)")
        elif now[p][0] != size:
            out.append(f"{p}: is {now[p][0]} bytes, was {size}")
        elif now[p][1] != mtime:
            out.append(f"{p}: was modified (same size, {size} bytes, new modification time)")
    return out


def refuse(found: Sequence[str], seen_by: str, afresh: str) -> None:
    """Raise :class:`InputsChangedError` for the changes ``found`` (if any): what changed, who saw it
    before, and how to start afresh (``afresh``)."""
    if not found:
        return
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    raise InputsChangedError(
        f"{len(found)} input file(s) changed since {seen_by} read them: {'; '.join(found[:3])}{more}. What was "
        "done from the old content would be mixed with the new (e.g. duplicates kept). Restore the file(s), "
        f"or start afresh: {afresh}"
    )


def afresh_hint(run_dir: str) -> str:
    """How to start afresh from ``run_dir``: a workflow's whole run directory, else the run's."""
    parent = os.path.dirname(os.path.abspath(run_dir))
    if is_workflow_root(parent):
        return (
            f"delete the workflow's run directory {parent} and its intermediate files in {os.path.dirname(parent)}, "
            "and the output; or write to a new output directory"
        )
    return f"delete {run_dir} and the outputs it records, or write to a new output directory"


def check_listing(run_dir: str, done: set[str], shard: Any = None, tasks: Iterable[Any] = ()) -> None:
    """For a process that listed its source tasks: refuse when a file that one of them recorded ``done``
    (in ``run_dir``; with ``shard``, its ledger files only) was computed from changed since.

    With the listed ``tasks``, each done task's recorded files are compared with the files it lists *now*,
    in order: the same data reached through another mount point or moved elsewhere (its ids hash paths
    relative to the reader's root, so it keeps them) is compared by size alone when its path differs (a move
    or another mount keeps the size; only an unmoved file can be held to its modification time too)."""
    if not done:
        return
    listed = {t.task_id: task_files([t]) for t in tasks if t.task_id in done}
    records = done_records(run_dir, done, shard)
    recorded: Stats = {}
    moved: list[str] = []
    for source, record in records.items():
        kept = [(p, size, mtime) for p, size, mtime in file_states(record, "inputs") if size is not None]
        now = listed.get(source)
        if now is not None and len(now) == len(kept) and now != sorted(p for p, _, _ in kept):
            for path, (old, size, _) in zip(now, kept, strict=True):
                current = stat_files([path]).get(path)
                if current is None or current[0] != size:
                    was = f"was {size} bytes as {old}"
                    moved.append(f"{path}: " + ("no longer exists" if current is None else f"is {current[0]} bytes")
                                 + f" ({was})")  # fmt: skip
            continue
        for path, size, mtime in kept:
            if mtime is not None:
                recorded[path] = (size, mtime)
    found = moved + changes(recorded, stat_files(recorded))
    refuse(found, f"the run in {run_dir}", afresh_hint(run_dir))


def check_recorded(run_dirs: Sequence[tuple[str, str]], afresh: str) -> None:
    """Refuse when a file that any done source task of ``run_dirs`` (``(who, run dir)``, e.g. the phases
    before this one) read changed since: each such file is looked at again."""
    for who, directory in run_dirs:
        recorded = recorded_inputs(directory)
        refuse(changes(recorded, stat_files(recorded)), who, afresh)


def plan_inputs(
    table: pa.Table | None, run_dir: str, others: Sequence[tuple[str, str]] = (), who: str | None = None
) -> None:
    """At `submit`/`retry`: the files of a plan's sources ``table`` against what the done work of
    ``run_dir`` (and of ``others``, e.g. the other phases of a workflow) read, refused when one changed."""
    files = table_files(table)
    if not files:
        return
    now = stat_files(files)
    for label, directory in [(who or f"the run in {run_dir}", run_dir), *others]:
        refuse(changes(recorded_inputs(directory), now, files), label, afresh_hint(run_dir))


def check_plan_inputs(plan: Mapping[str, Any], sources: Mapping[str, Any] | None = None) -> None:
    """What `submit`, `retry` and `local` check before starting anything: the files of a plan (as
    ``run_plan`` gives it) against what the done work of the run read; for a workflow, each phase's
    planned files (``sources``, by phase; default the plan's ``phase_sources``) against what every phase read."""
    if plan.get("kind") != "workflow":
        if plan.get("run_dir"):
            plan_inputs(plan.get("sources_table"), plan["run_dir"])
        return
    tables = sources if sources is not None else plan.get("phase_sources") or {}
    dirs = [(p["phase"], p["run_dir"]) for p in plan["phases"]]
    label = {n: f"phase {n!r} of workflow {plan['workflow']!r}" for n, _ in dirs}
    for name, directory in dirs:
        others = [(label[n], d) for n, d in dirs if n != name]
        plan_inputs(tables.get(name), directory, others, who=label[name])


def table_files(table: pa.Table | None) -> list[str]:
    """The files of a plan's sources table (``runs.manifest.SCHEMA``), each once."""
    if table is None:
        return []
    return sorted({os.path.abspath(p) for group in table.column("data").to_pylist() for p in group if "://" not in p})


__all__ = [
    "InputsChangedError",
    "afresh_hint",
    "changed_files",
    "changes",
    "check_listing",
    "check_plan_inputs",
    "check_recorded",
    "done_records",
    "file_states",
    "input_states",
    "plan_inputs",
    "position_base",
    "recorded_inputs",
    "stat_files",
    "table_files",
    "task_files",
]

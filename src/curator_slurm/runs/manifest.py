"""Plan once: the source tasks of a submission, listed by ``curator-slurm submit`` and kept in
``<run dir>/manifest/<kind>-<n>/``, so that array tasks load their shard's share instead of listing the input.
Design: docs/design.md, "Plan once"; layout: docs/reference.md."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curator_slurm import fs
from curator_slurm.errors import ShardConfigError
from curator_slurm.runs.layout import MANIFEST_DIR
from curator_slurm.runs.sharding import balanced_assignment, hash_assignment
from curator_slurm.shard import ShardSpec
from curator_slurm.tasks import FileGroupTask, Task

INFO_FILE = "manifest.json"
#: The version of the layout above; a task refuses a manifest of another version.
FORMAT = 1
#: ``task.metadata`` key of the planned size of each file of a task rebuilt from a manifest (same order as
#: ``data``); the readers compare it with the file's size when they open it.
SIZES_KEY = "file_sizes"

SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("dataset_name", pa.string()),
        ("data", pa.list_(pa.string())),
        ("sizes", pa.list_(pa.int64())),
        ("metadata", pa.string()),
        ("weight", pa.int64()),
    ]
)


@dataclass(frozen=True)
class ManifestInfo:
    """What ``manifest.json`` says: enough for a task to find its file and check the run directory."""

    path: str
    shards: int
    strategy: str
    count: int
    #: As ``rundir.source_record`` makes it (count, digest, and weights_digest when balanced): what a task
    #: compares with the run directory's sources.json instead of listing every id.
    sources: dict[str, Any]
    #: Per shard: [task count, bytes (weight)].
    loads: tuple[tuple[int, int], ...]

    def shard_file(self, index: int) -> str:
        return os.path.join(self.path, shard_file_name(index))


def shard_file_name(index: int) -> str:
    return f"shard-{index:05d}.parquet"


# --- at plan time (the script run with CURATOR_PLAN_OUT) ----------------------------------------------


def sources_table(tasks: Sequence[Task]) -> pa.Table | None:
    """Every source task as a table of :data:`SCHEMA`, with each file's current size; None when some task
    cannot be rebuilt from a row (not a plain FileGroupTask, or metadata that does not survive JSON)."""
    ids, names, data, sizes, metadata, weights = [], [], [], [], [], []
    for t in tasks:
        if type(t) is not FileGroupTask or not isinstance(t.data, list):
            return None
        if any(fs.printable(p) != p for p in t.data):  # a name that is not UTF-8: no Arrow string holds it
            return None
        try:
            text = json.dumps(t.metadata, separators=(",", ":"))
        except (TypeError, ValueError):
            return None
        if json.loads(text) != t.metadata:  # tuples, non-string keys: would come back different
            return None
        ids.append(t.task_id)
        names.append(t.dataset_name)
        data.append(t.data)
        sizes.append([fs.size(p) for p in t.data])
        metadata.append(text)
        weights.append(int(t.weight))
    columns = [ids, names, data, sizes, metadata, weights]
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, SCHEMA, strict=True)], schema=SCHEMA)


def save_plan_sources(plan_out: str, tasks: Sequence[Task], tag: str = "") -> str | None:
    """Write the full source tasks next to the plan file ``plan_out`` (one file per plan line, and per
    ``tag``, e.g. a workflow's phase); the path, for the plan's ``sources_file``, or None when the tasks
    cannot go into a manifest."""
    table = sources_table(tasks)
    if table is None:
        return None
    n = 0
    if os.path.exists(plan_out):
        with open(plan_out, encoding="utf-8") as f:
            n = sum(1 for line in f if line.strip())
    path = f"{plan_out}.sources-{n}{tag}.parquet"
    pq.write_table(table, path, compression="zstd")
    return path


# --- at submit ----------------------------------------------------------------------------------------


def assign(table: pa.Table, shards: int, strategy: str) -> list[int]:
    """The shard of each row: the same functions the tasks' own shard filter uses."""
    ids = table.column("task_id").to_pylist()
    if strategy == "balanced":
        return balanced_assignment(ids, table.column("weight").to_pylist(), shards)
    if strategy == "hash":
        return hash_assignment(ids, shards)
    raise ShardConfigError(f"shard strategy {strategy!r} is not one of hash, balanced")


def write_manifest(
    directory: str,
    table: pa.Table,
    shards: int,
    strategy: str,
    assignment: Sequence[int] | None = None,
    sources: dict[str, Any] | None = None,
) -> ManifestInfo:
    """Write the manifest of ``table`` (rows of :data:`SCHEMA`) for ``shards`` shards into ``directory``
    (which must not exist yet): built in a hidden sibling directory, fsynced, then renamed into place, so a
    task sees a whole manifest or none. ``assignment`` (one shard per row) defaults to ``strategy``'s.
    ``sources`` (a ``rundir.source_record``) is what tasks check the run directory against; it defaults to
    the record of ``table``'s ids, and a retry passes that of every planned task, not only the remaining ones."""
    from curator_slurm.runs.rundir import source_record

    if shards < 1:
        raise ShardConfigError(f"a manifest needs at least 1 shard, not {shards}")
    if os.path.exists(directory):
        raise FileExistsError(f"{directory} already exists; a manifest is written once, into a new directory")
    owner = list(assignment) if assignment is not None else assign(table, shards, strategy)
    if len(owner) != table.num_rows:
        raise ValueError(f"{len(owner)} shard numbers for {table.num_rows} source tasks")
    parent, name = os.path.split(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, fs.temp_name(name))  # says its writer, like every temporary name
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        rows: list[list[int]] = [[] for _ in range(shards)]
        for i, s in enumerate(owner):
            rows[s].append(i)
        weights = table.column("weight").to_pylist()
        loads = tuple((len(r), sum(weights[i] for i in r)) for r in rows)
        for s, r in enumerate(rows):
            _write_synced(os.path.join(tmp, shard_file_name(s)), table.take(pa.array(r, type=pa.int64())))
        # Ids only, whatever the strategy: the manifest fixes who does what, so the sizes need not agree.
        record = sources or source_record(table.column("task_id").to_pylist())
        info = {
            "format": FORMAT,
            "shards": shards,
            "strategy": strategy,
            "count": table.num_rows,
            "sources": record,
            "loads": [list(x) for x in loads],
        }
        with open(os.path.join(tmp, INFO_FILE), "w", encoding="utf-8") as f:
            json.dump(info, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, directory)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return read_info(directory)


def _write_synced(path: str, table: pa.Table) -> None:
    with open(path, "wb") as f:
        pq.write_table(table, f, compression="zstd")
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def new_manifest_dir(run_dir: str, kind: str) -> str:
    """``<run dir>/manifest/<kind>-<n>``, n the first number not taken: each submission keeps its own, so
    the tasks of an earlier one never see their manifest change."""
    root = os.path.join(run_dir, MANIFEST_DIR)
    n = 0
    while os.path.exists(os.path.join(root, f"{kind}-{n}")):
        n += 1
    return os.path.join(root, f"{kind}-{n}")


def attach_manifest(
    opts: Any, table: pa.Table, kind: str, dry_run: bool, sources: dict[str, Any] | None = None
) -> tuple[Any, ManifestInfo | None]:
    """Plan once for a submission: write ``table`` as a manifest of ``opts.shards`` shards into a new
    ``<opts.run_dir>/manifest/<kind>-<n>/`` (not on a dry run) and return ``opts`` (a ``SubmitOptions``) with
    the strategy it used (``opts.strategy``, default ``balanced``) and ``CURATOR_MANIFEST`` exported to
    every task, plus the manifest (None on a dry run)."""
    directory = new_manifest_dir(opts.run_dir, kind)
    strategy = opts.strategy or "balanced"
    info = None if dry_run else write_manifest(directory, table, opts.shards, strategy, sources=sources)
    env = (*(kv for kv in opts.env if kv[0] != "CURATOR_MANIFEST"), ("CURATOR_MANIFEST", directory))
    return dataclasses.replace(opts, strategy=strategy, env=env), info


def read_sources(path: str) -> pa.Table:
    """A plan's sources file (or any table of :data:`SCHEMA`)."""
    return pq.read_table(path, schema=SCHEMA)


# --- in an array task -----------------------------------------------------------------------------------


def read_info(directory: str) -> ManifestInfo:
    """The manifest in ``directory``; a clear error naming CURATOR_MANIFEST when it is not one."""
    path = os.path.join(directory, INFO_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except FileNotFoundError:
        raise ShardConfigError(
            f"CURATOR_MANIFEST={directory!r} holds no {INFO_FILE}: not a manifest (or one still being written); "
            "point it at a directory that `curator-slurm submit` wrote, or unset it to list the inputs"
        ) from None
    except (OSError, ValueError) as e:
        raise ShardConfigError(
            f"{path} cannot be read ({e}); submit the run again (`curator-slurm submit` writes a new manifest)"
        ) from None
    if raw.get("format") != FORMAT:
        raise ShardConfigError(
            f"{path} is a manifest of format {raw.get('format')!r}; this version reads format {FORMAT}. "
            "Submit the run again with this version"
        )
    return ManifestInfo(
        path=os.path.abspath(directory),
        shards=int(raw["shards"]),
        strategy=str(raw["strategy"]),
        count=int(raw["count"]),
        sources=dict(raw["sources"]),
        loads=tuple((int(c), int(w)) for c, w in raw["loads"]),
    )


def rebuild(table: pa.Table) -> list[FileGroupTask]:
    """The source tasks of ``table``, as the source stage made them, plus each file's planned size under
    :data:`SIZES_KEY`."""
    cols = {name: table.column(name).to_pylist() for name in ("task_id", "dataset_name", "data", "sizes", "metadata")}
    loads = json.loads
    tasks = []
    for task_id, dataset, data, sizes, text in zip(*cols.values(), strict=True):
        metadata = loads(text)
        metadata[SIZES_KEY] = sizes
        tasks.append(FileGroupTask(task_id=task_id, dataset_name=dataset, data=data, metadata=metadata))
    return tasks


def load_shard(directory: str, shard: ShardSpec) -> tuple[list[FileGroupTask], ManifestInfo]:
    """This shard's source tasks, read from its file only, and the manifest's description.

    A shard count that is a multiple of the manifest's (``srun -n k`` inside each array task splits its
    shard in k) reads its array task's file and keeps every k-th task of it."""
    info = read_info(directory)
    if shard.count % info.shards != 0:
        origin = shard.origin if shard.enabled else "this process is not sharded"
        raise ShardConfigError(
            f"CURATOR_MANIFEST={directory!r} was planned for {info.shards} shard(s), but this process is "
            f"{shard.label} ({origin}); run it as a task of the array `curator-slurm submit` made for it, or "
            "unset CURATOR_MANIFEST to list the inputs"
        )
    split = shard.count // info.shards
    path = info.shard_file(shard.index // split)
    try:
        table = pq.read_table(path, schema=SCHEMA)
    except FileNotFoundError:
        raise ShardConfigError(
            f"{path} is missing from the manifest CURATOR_MANIFEST={directory!r}; submit the run again"
        ) from None
    tasks = rebuild(table)
    if split > 1:
        tasks = tasks[shard.index % split :: split]
    return tasks, info


def check_sources(run_dir_path: str, info: ManifestInfo, accept_new_inputs: bool) -> None:
    """The run directory's input check with a manifest: its recorded sources (count and digest of every
    id) against the run's sources.json, without reading every id."""
    from curator_slurm.runs.rundir import SOURCES_FILE, _compare_sources, _write_once

    have = _write_once(os.path.join(run_dir_path, SOURCES_FILE), info.sources)
    _compare_sources(run_dir_path, have, info.sources, "weights_digest" in info.sources, accept_new_inputs)


__all__ = [
    "INFO_FILE",
    "SCHEMA",
    "SIZES_KEY",
    "ManifestInfo",
    "assign",
    "attach_manifest",
    "check_sources",
    "load_shard",
    "new_manifest_dir",
    "read_info",
    "read_sources",
    "rebuild",
    "save_plan_sources",
    "sources_table",
    "write_manifest",
]

"""The user's document ids in fuzzy dedup's list of duplicates (``identify_only=True, id_field=...``): ``ids`` and
``join``, two phases after ``components`` that fetch the ids from the input by key range."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from curator_slurm import fs
from curator_slurm._lazy import LazyModule
from curator_slurm.errors import InputError
from curator_slurm.runs.upstream import Upstream, files_of
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.io.readers import FileReader
from curator_slurm.stages.positions import document_positions
from curator_slurm.tasks import DocumentBatch, FileGroupTask
from curator_slurm.workflows.dedup.common import KEY, SortedKeyWriter, keys_in_range
from curator_slurm.workflows.shuffle import BucketSource
from curator_slurm.workflows.workflow import Phase

pq = LazyModule("pyarrow.parquet")


class ListedIds(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Phase ``ids``: (key, id) of the documents of a batch that ``members_dir`` lists."""

    name = "listed_ids"

    def __init__(self, members: Upstream, id_field: str) -> None:
        self.members = members
        self.id_field = id_field

    def params(self) -> dict[str, Any]:
        return {"id_field": self.id_field}  # where the list lives is not what the stage does

    def upstreams(self) -> list[Any]:
        return [self.members]

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], [self.id_field]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [KEY, self.id_field]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        if self.id_field not in table.column_names:
            where = task.where()
            raise InputError(
                f"{where}: no field {self.id_field!r} (FuzzyDuplicates' id_field) to list; the data has "
                f"{table.column_names}. Set id_field= to one of them, or None."
            )
        keys = document_positions(task).keys
        files = files_of(self.members, suffix=".parquet")
        listed = keys_in_range(files, int(keys.min()), int(keys.max())) if len(keys) else keys
        mask = np.isin(keys, listed)
        ids = table.column(self.id_field).filter(pa.array(mask))
        return task.derive(pa.table({KEY: keys[mask], self.id_field: ids}))


def _read_parquet(path: str, columns: list[str] | None) -> pa.Table:
    with fs.open_input(path) as f:
        return pq.read_table(f, columns=columns)


def _read_all(upstream: Upstream, columns: list[str] | None = None) -> pa.Table | None:
    tables = [_read_parquet(path, columns) for path in files_of(upstream, suffix=".parquet")]
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables, promote_options="permissive") if tables else None


class JoinIds(ProcessingStage[FileGroupTask, DocumentBatch]):
    """Phase ``join`` (one task): the members list with each document's id and its survivor's id, without
    the survivors' own rows."""

    name = "join_ids"

    def __init__(self, members: Upstream, ids: Upstream, id_field: str) -> None:
        self.members = members
        self.ids = ids
        self.id_field = id_field

    def params(self) -> dict[str, Any]:
        return {"id_field": self.id_field}

    def upstreams(self) -> list[Any]:
        return [self.members, self.ids]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], None

    def process(self, task: FileGroupTask) -> DocumentBatch:
        members = _read_all(self.members)
        ids = _read_all(self.ids, [KEY, self.id_field])
        if members is None:
            empty = {KEY: pa.array([], pa.int64()), "group_key": pa.array([], pa.int64())}
            return task.derive(pa.table(empty), cls=DocumentBatch)
        keys = members.column(KEY).to_numpy()
        groups = members.column("group_key").to_numpy()
        id_keys = ids.column(KEY).to_numpy() if ids is not None else np.empty(0, np.int64)
        id_values = ids.column(self.id_field) if ids is not None else pa.array([], pa.string())
        order = np.argsort(id_keys, kind="stable")
        sorted_keys = id_keys[order]

        def ids_of(wanted: np.ndarray) -> pa.Array:
            at = np.minimum(np.searchsorted(sorted_keys, wanted), max(len(sorted_keys) - 1, 0))
            if not len(sorted_keys) or not np.array_equal(sorted_keys[at], wanted):
                raise InputError(
                    f"fuzzy dedup ids: phase {self.ids.name!r} lacks ids of documents phase {self.members.name!r} lists"
                )
            return id_values.take(pa.array(order[at]))

        listed = np.flatnonzero(keys != groups)
        out = members.take(pa.array(listed))
        out = out.append_column(self.id_field, ids_of(keys[listed]))
        out = out.append_column(f"group_{self.id_field}", ids_of(groups[listed]))
        return task.derive(out, cls=DocumentBatch)


def id_phases(name: str, reader: FileReader, id_field: str, members: Upstream, work: str, list_dir: str) -> list[Phase]:
    """The ``ids`` and ``join`` phases (docs/reference.md, "The user's ids") after the phase ``members``; the
    list goes to ``list_dir``."""
    from curator_slurm.pipeline import Pipeline
    from curator_slurm.workflows.workflow import phase_upstream

    ids_dir = fs.join(work, "ids")
    ids = phase_upstream(work, "ids")
    return [
        Phase(
            "ids",
            Pipeline(f"{name}-ids")
            .add_stage(reader.with_fields([id_field]))
            .add_stage(ListedIds(members, id_field))
            .add_stage(SortedKeyWriter(ids_dir)),
        ),
        Phase(
            "join",
            Pipeline(f"{name}-join")
            .add_stage(BucketSource(ids_dir, 1, f"{name}/ids", ids))
            .add_stage(JoinIds(members, ids, id_field))
            .add_stage(SortedKeyWriter(list_dir)),
            max_shards=1,
        ),
    ]

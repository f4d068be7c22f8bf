"""Stable document ids from document positions (``<prefix>_<file hash>_<row>``): the same id whichever shard,
executor or re-run processes a document, and after the input directory moves. Put ``AddId`` before any stage
that drops rows. Design: docs/design.md, section Document positions and ids."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from curator_slurm.errors import InputError
from curator_slurm.stages.base import PASSTHROUGH, ProcessingStage
from curator_slurm.stages.positions import document_positions
from curator_slurm.stages.text.compute import call, cast
from curator_slurm.tasks import DocumentBatch, content_id


def position_ids(paths: pa.Array, rows: pa.Array | object, prefix: str | None = None) -> pa.Array:
    """The ids of documents at ``paths`` (relative, one per document) and ``rows`` (int64, one per
    document): ``[prefix_]<xxh64 of path>_<row>`` (docs/catalogue.md, ``AddId``)."""
    encoded = call("dictionary_encode", paths)
    hashes = pa.array([content_id(p) for p in encoded.dictionary.to_pylist()], pa.string())
    return _join(call("take", hashes, encoded.indices), rows, prefix)


def file_ids(
    names: tuple[str, ...] | list[str], which: np.ndarray, rows: np.ndarray, prefix: str | None = None
) -> pa.Array:
    """The ids of documents in the files ``names`` (relative paths as the OS names them), ``which`` file and
    ``rows`` (one each per document): :func:`position_ids` of the files' names, a name that is not UTF-8
    hashed as its bytes."""
    hashes = pa.array([content_id(p) for p in names], pa.string())
    file_part = call("take", hashes, pa.array(which, pa.int32()))
    return _join(file_part, rows, prefix)


def _join(file_part: pa.Array, rows: pa.Array | object, prefix: str | None) -> pa.Array:
    row_part = cast(pa.array(rows, pa.int64()), pa.string())
    parts = [file_part, row_part]
    if prefix:
        parts.insert(0, pa.scalar(prefix, pa.string()))
    return call("binary_join_element_wise", *parts, pa.scalar("_", pa.string()))


class AddId(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Give every document a stable id in ``id_field`` (NeMo Curator's ``AddId`` parameters). The id derives
    from the document's position, so it must come before any stage that drops rows.

    Args:
        id_field: the field the ids go to.
        id_prefix: what starts every id (e.g. a dataset name); None: no prefix.
        overwrite: replace a field of that name the data already has (else that is an error).
    """

    name = "add_id"

    def __init__(self, id_field: str, id_prefix: str | None = None, overwrite: bool = False) -> None:
        if not isinstance(id_field, str) or not id_field:
            raise ValueError(f"AddId(id_field={id_field!r}): give the name of the field to write the ids into")
        if id_prefix is not None and not isinstance(id_prefix, str):
            raise TypeError(f"AddId(id_prefix={id_prefix!r}): the prefix must be a string")
        self.id_field = id_field
        self.id_prefix = id_prefix or None
        self.overwrite = overwrite

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], []

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], [PASSTHROUGH, self.id_field]

    def process(self, task: DocumentBatch) -> DocumentBatch:
        table = task.data
        exists = self.id_field in table.column_names
        if exists and not self.overwrite:
            where = task.where()
            raise InputError(
                f"{where}: the data already has a field {self.id_field!r}; give AddId another id_field, or "
                "overwrite=True to replace it"
            )
        positions = document_positions(task)
        ids = file_ids(positions.names, positions.which, positions.rows, self.id_prefix)
        if exists:
            table = table.set_column(table.column_names.index(self.id_field), self.id_field, ids)
        else:
            table = table.append_column(self.id_field, ids)
        return task.derive(table)

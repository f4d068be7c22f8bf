"""A task's typed origin: what readers put on a batch is what positions, the chain and the ledger read back."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from curator_slurm.stages import JsonlReader
from curator_slurm.tasks import DocumentBatch, EmptyTask, FileGroupTask, Origin

paths = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12), max_size=5)


@given(
    files=paths,
    rows=st.none() | st.lists(st.integers(0, 1 << 40), max_size=5),
    indices=st.none() | st.lists(st.integers(0, 1 << 40), max_size=5),
    root=st.none() | st.text(max_size=10),
    upstream=st.none() | st.integers(0, 1 << 60),
)
def test_an_origin_survives_the_metadata_form_it_travels_in(
    files: list[str], rows: list[int] | None, indices: list[int] | None, root: str | None, upstream: int | None
) -> None:
    origin = Origin(
        tuple(files),
        None if rows is None else tuple(rows),
        None if indices is None else tuple(indices),
        root,
        upstream,
    )
    assert Origin.of(origin.as_metadata()) == origin
    batch = DocumentBatch(task_id="t", metadata=origin.as_metadata())
    assert batch.origin == origin
    assert batch.where() == (", ".join(files) or "t")


def test_a_reader_batch_names_its_files_rows_and_root(corpus: Path) -> None:
    """What JsonlReader hands on says which files its rows came from, how many each gave, and the root."""
    reader = JsonlReader(str(corpus), files_per_partition=2)
    stages = reader.decompose()
    (group, *_) = stages[0].process(EmptyTask(task_id="start"))
    assert isinstance(group, FileGroupTask)
    (batch,) = [b for b in [stages[1].process(group)] if b is not None]
    origin = batch.origin
    assert list(origin.files) == group.data and len(origin.files) == 2
    assert origin.file_rows is not None and sum(origin.file_rows) == batch.num_items == 120
    assert origin.root is not None and Path(origin.root) == corpus.resolve()

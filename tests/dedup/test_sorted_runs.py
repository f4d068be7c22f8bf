"""The sorted-run shuffle of fuzzy dedup's bands and the k-way merge of the candidates phase: for any rows, any
split into runs, any block size and any bucket count, the merged star edges are those of the whole bucket held
in memory (the reference), with and without the signature check; a bucket reader reads only its own bytes; a
damaged file is refused by name."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_slurm.errors import InputError
from curator_slurm.tasks import DocumentBatch
from curator_slurm.workflows.dedup import minhash
from curator_slurm.workflows.dedup.candidates import BAND_ORDER, merge_runs, streamed_edges
from curator_slurm.workflows.dedup.components import duplicate_members
from curator_slurm.workflows.shuffle import bucket_of
from curator_slurm.workflows.sorted_runs import SortedRunWriter, read_head, read_run

WIDTH = 16  # signature bytes per row in the verified variant


def _rows(seed: int, docs: int, bands: int, values: int, signed: bool) -> dict[str, np.ndarray]:
    """``docs`` documents' band rows: values drawn from a few, so that (band, value) groups form."""
    rng = np.random.default_rng(seed)
    keys = np.sort(rng.choice(1 << 40, size=docs, replace=False)).astype(np.int64)
    rows = {
        "band": np.tile(np.arange(bands, dtype=np.int32), docs),
        "value": rng.integers(0, values, size=docs * bands).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15),
        "key": np.repeat(keys, bands),
    }
    if signed:
        base = rng.integers(0, 4, size=(values, WIDTH), dtype=np.uint8)  # near-equal signatures per value
        noise = rng.integers(0, 256, size=(docs * bands, WIDTH), dtype=np.uint8)
        flip = rng.random((docs * bands, WIDTH)) < 0.3
        pick = (rows["value"] // np.uint64(0x9E3779B97F4A7C15)).astype(np.int64) % values
        rows["signature"] = np.where(flip, noise, base[pick])
    return rows


def _table(rows: dict[str, np.ndarray], buckets: int) -> pa.Table:
    columns: dict[str, object] = {c: rows[c] for c in BAND_ORDER}
    columns["bucket"] = bucket_of(rows["value"], buckets).astype(np.int32)
    if "signature" in rows:
        sig = np.ascontiguousarray(rows["signature"])
        columns["signature"] = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(WIDTH), len(sig), [None, pa.py_buffer(sig.tobytes())]
        )
    return pa.table(columns)


def _write_runs(tmp: Path, rows: dict[str, np.ndarray], cuts: list[int], buckets: int, block_rows: int) -> list[str]:
    """The rows, cut at ``cuts`` (row positions) into batches, each written as one run file."""
    writer = SortedRunWriter(tmp, buckets, BAND_ORDER, block_rows=block_rows)
    writer.setup()
    table = _table(rows, buckets)
    bounds = [0, *sorted(set(cuts)), table.num_rows]
    files = []
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        batch = DocumentBatch(task_id=f"t{i}", dataset_name="d", data=table.slice(lo, hi - lo), source_id=f"s{i}")
        files += writer.process(batch).data
    return files


def _merged(files: list[str], bucket: int, threshold: float | None) -> set[tuple[int, int]]:
    runs = [read_run(f, bucket, read_size=64) for f in files]
    bits = 8 if threshold is not None else None
    return {(int(a), int(b)) for u, v in streamed_edges(merge_runs(runs, BAND_ORDER), threshold, bits)
            for a, b in zip(u, v, strict=True)}  # fmt: skip


def _reference(rows: dict[str, np.ndarray], buckets: int, bucket: int, threshold: float | None):
    mine = bucket_of(rows["value"], buckets) == bucket
    sig = rows["signature"][mine] if threshold is not None else None
    bits = 8 if sig is not None else None
    u, v = minhash.candidate_edges(
        rows["band"][mine], rows["value"][mine], rows["key"][mine], signatures=sig, threshold=threshold, bits=bits
    )
    return {(int(a), int(b)) for a, b in zip(u, v, strict=True)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    docs=st.integers(1, 60),
    bands=st.integers(1, 4),
    values=st.integers(1, 12),
    cuts=st.lists(st.integers(0, 240), max_size=6),
    buckets=st.integers(1, 4),
    block_rows=st.integers(1, 9),
    threshold=st.sampled_from([None, 0.5]),
)
def test_merged_edges_are_the_in_memory_edges(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    docs: int,
    bands: int,
    values: int,
    cuts: list[int],
    buckets: int,
    block_rows: int,
    threshold: float | None,
) -> None:
    tmp = tmp_path_factory.mktemp("runs")
    rows = _rows(seed, docs, bands, values, signed=threshold is not None)
    rng = np.random.default_rng(seed)
    order = rng.permutation(docs * bands)  # documents' rows spread over the runs in any order
    shuffled = {c: a[order] for c, a in rows.items()}
    files = _write_runs(tmp, shuffled, [c for c in cuts if c < docs * bands], buckets, block_rows)
    all_edges: set[tuple[int, int]] = set()
    for b in range(buckets):
        merged = _merged(files, b, threshold)
        assert merged == _reference(rows, buckets, b, threshold)
        all_edges |= merged
    # and so the same documents are removed as from the reference's edges
    ref = set().union(*(_reference(rows, buckets, b, threshold) for b in range(buckets)))
    if all_edges:
        got = duplicate_members([(np.array([e[0] for e in all_edges]), np.array([e[1] for e in all_edges]))])
        want = duplicate_members([(np.array([e[0] for e in ref]), np.array([e[1] for e in ref]))])
        assert [a.tolist() for a in got] == [a.tolist() for a in want]


def test_a_bucket_reader_reads_only_its_own_bytes(tmp_path: Path) -> None:
    rows = _rows(3, 200, 3, 40, signed=False)
    (path,) = _write_runs(tmp_path, rows, [], 4, 16)
    data = bytearray(Path(path).read_bytes())
    mine = read_head(path, 2)
    for b in (0, 1, 3):  # every other bucket's bytes made garbage
        other = read_head(path, b)
        data[other.start : other.end] = b"\xff" * (other.end - other.start)
    Path(path).write_bytes(bytes(data))
    keys = np.concatenate([block["key"] for block, _ in read_run(path, 2, read_size=100)])
    assert mine.end > mine.start
    assert sorted(keys.tolist()) == sorted(rows["key"][bucket_of(rows["value"], 4) == 2].tolist())
    with pytest.raises(InputError, match="sorted-run block"):
        list(read_run(path, 0))


def test_a_cut_short_or_foreign_file_is_refused_by_name(tmp_path: Path) -> None:
    rows = _rows(5, 100, 2, 10, signed=False)
    (path,) = _write_runs(tmp_path, rows, [], 2, 8)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) - 5])
    with pytest.raises(InputError, match="cut short"):
        list(read_run(path, 1))
    Path(path).write_bytes(b"PAR1" + data[4:])
    with pytest.raises(InputError, match="not a sorted-run file"):
        list(read_run(path, 0))
    Path(path).write_bytes(data)
    with pytest.raises(InputError, match="not a sorted-run file of bucket 7"):
        read_head(path, 7)


def test_a_round_of_the_merge_is_bounded_by_the_runs_not_the_rows(tmp_path: Path) -> None:
    """However many rows a bucket has, a round of the merge holds at most two blocks of each run (the memory the
    candidates phase is sized by), and the rounds come out in order."""
    rows = _rows(11, 3000, 2, 500, signed=False)
    files = _write_runs(tmp_path, rows, list(range(600, 6000, 600)), 1, 8)  # 10 runs of 600 rows, blocks of 8
    chunks = list(merge_runs([read_run(f, 0, read_size=64) for f in files], BAND_ORDER))
    assert sum(len(c["key"]) for c in chunks) == 6000
    assert max(len(c["key"]) for c in chunks) <= 2 * 8 * len(files)
    band, value, key = (np.concatenate([c[name] for c in chunks]) for name in BAND_ORDER)
    assert np.array_equal(np.lexsort((key, value, band)), np.arange(len(key)))  # in (band, value, key) order

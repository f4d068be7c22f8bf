"""Connected components over chunked edge lists (curator_slurm.workflows.dedup.components) against a plain
Python union-find, on chains, stars and random graphs, with chunks cut anywhere."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest

from curator_slurm.workflows.dedup.components import connected_components, duplicate_members


def reference_components(edges: list[tuple[int, int]]) -> dict[int, int]:
    """Each node of ``edges`` -> the smallest node of its component (dict union-find, no tricks)."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for u, v in edges:
        parent.setdefault(u, u)
        parent.setdefault(v, v)
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
    return {x: find(x) for x in parent}


def chunked(edges: list[tuple[int, int]], size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    arr = np.array(edges, dtype=np.int64).reshape(-1, 2)
    return [(arr[i : i + size, 0], arr[i : i + size, 1]) for i in range(0, len(arr), size)]


def doc_key(file_index: int, row: int) -> int:
    return (file_index << 32) | row


def graphs() -> dict[str, list[tuple[int, int]]]:
    rng = random.Random(7)
    n = 3000
    keys = sorted(rng.sample(range(1 << 40), n))  # sparse, large keys, like (file << 32 | row)
    chain = [(keys[i], keys[i + 1]) for i in range(n - 1)]
    out = {
        "chain": chain,
        "chain reversed": [(v, u) for u, v in reversed(chain)],
        "chain shuffled": rng.sample(chain, len(chain)),
        "star to the largest key": [(keys[-1], k) for k in keys[:-1]],
        "star to the smallest key": [(k, keys[0]) for k in keys[1:]],
        "many small stars": [(keys[i - i % 10], keys[i]) for i in range(n) if i % 10],
        "self loops and repeats": [(keys[0], keys[0]), (keys[1], keys[2]), (keys[2], keys[1]), (keys[1], keys[2])],
        "doc keys across files": [
            (doc_key(3, 5), doc_key(0, 9)),
            (doc_key(0, 9), doc_key(7, 0)),
            (doc_key(2, 1), doc_key(2, 0)),
        ],
    }
    for m in (500, 2000, 6000):  # below, near and above the giant-component threshold (m ~ n / 2)
        out[f"random n={n} m={m}"] = [(rng.choice(keys), rng.choice(keys)) for _ in range(m)]
    out["two interleaved chains"] = [(keys[i], keys[i + 2]) for i in range(n - 2)]
    return out


@pytest.mark.parametrize("name", list(graphs()))
@pytest.mark.parametrize("chunk", [1, 97, 1 << 22])
def test_components_equal_a_plain_union_find(name: str, chunk: int) -> None:
    edges = graphs()[name]
    expected = reference_components(edges)
    for source in (chunked(edges, 250), lambda: iter(chunked(edges, 33))):
        keys, roots = connected_components(source, chunk_edges=chunk)
        assert keys.tolist() == sorted(expected), name
        assert dict(zip(keys.tolist(), roots.tolist(), strict=True)) == expected, name


@pytest.mark.parametrize("name", ["chain shuffled", "random n=3000 m=2000", "many small stars"])
def test_duplicate_members_are_every_non_survivor_with_its_survivor(name: str) -> None:
    edges = graphs()[name]
    expected = {k: r for k, r in reference_components(edges).items() if k != r}
    drop, group = duplicate_members(chunked(edges, 500), chunk_edges=128)
    assert drop.dtype == group.dtype == np.int64
    assert drop.tolist() == sorted(expected)
    assert dict(zip(drop.tolist(), group.tolist(), strict=True)) == expected
    assert (group < drop).all()  # the survivor is the smallest key: the first in (path, row) order


def test_no_edges_no_members() -> None:
    keys, roots = connected_components([])
    assert len(keys) == len(roots) == 0
    drop, group = duplicate_members([(np.zeros(0, np.int64), np.zeros(0, np.int64))])
    assert len(drop) == len(group) == 0


def test_an_iterator_is_refused_because_the_edges_are_read_twice() -> None:
    with pytest.raises(TypeError, match="read only once"):
        connected_components(iter(chunked([(1, 2)], 1)))


def test_chunks_must_be_pairs_of_equal_length() -> None:
    with pytest.raises(ValueError, match="one length"):
        connected_components([(np.array([1, 2]), np.array([3]))])


def test_memory_grows_with_nodes_not_edges() -> None:
    """Four times the edges over the same nodes: the peak of traced allocations stays within the
    per-node arrays plus one chunk, far below what holding the edges would take."""
    nodes, chunk = 20_000, 1 << 15
    rng = np.random.default_rng(3)
    keys = np.sort(rng.choice(1 << 40, size=nodes, replace=False)).astype(np.int64)

    def edges(total: int):
        def read():
            gen = np.random.default_rng(11)  # the same edges on each read
            for _ in range(total // chunk):
                yield keys[gen.integers(0, nodes, chunk)], keys[gen.integers(0, nodes, chunk)]

        return read

    peaks = {}
    for total in (1 << 18, 1 << 20):
        tracemalloc.start()
        keys_out, roots = connected_components(edges(total), chunk_edges=chunk)
        peaks[total] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert len(keys_out) == nodes and len(np.unique(roots)) == 1  # that many random edges connect all
    held_edges = (1 << 20) * 16
    mib = {k: f"{v / 2**20:.1f} MiB" for k, v in peaks.items()}
    print(f"\npeak traced memory: {mib[1 << 18]} for 2^18 edges, {mib[1 << 20]} for 2^20 (holding them: 16 MiB)")
    assert peaks[1 << 20] < 1.5 * peaks[1 << 18], peaks
    assert peaks[1 << 20] < held_edges / 2, peaks


@pytest.mark.parametrize(
    "name", ["chain reversed", "random n=3000 m=6000", "self loops and repeats", "many small stars"]
)
@pytest.mark.parametrize("block", [1, 7, 1000])
def test_blocks_and_batches_cut_anywhere_give_the_same_list(
    name: str, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final flattening in blocks of ranks, and the list in batches, cut at any node: the same components, the
    same list (sorted, batch after batch), and with survivors each group's smallest key once, as (key, key)."""
    import curator_slurm.workflows.dedup.components as components

    edges = graphs()[name]
    expected = reference_components(edges)
    monkeypatch.setattr(components, "_FLATTEN_BLOCK", block)
    keys, roots = connected_components(chunked(edges, 97), chunk_edges=97)
    assert dict(zip(keys.tolist(), roots.tolist(), strict=True)) == expected
    for survivors in (False, True):
        batches = list(
            components.duplicate_member_batches(chunked(edges, 97), chunk_edges=97, survivors=survivors, batch=block)
        )
        assert all(len(k) <= block for k, _ in batches)
        listed = [(int(k), int(g)) for ks, gs in batches for k, g in zip(ks, gs, strict=True)]
        assert [k for k, _ in listed] == sorted({k for k, _ in listed})  # sorted, each key once
        members = {k: g for k, g in expected.items() if k != g}
        firsts = {g: g for g in members.values()} if survivors else {}
        assert dict(listed) == {**members, **firsts}

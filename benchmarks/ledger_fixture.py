"""A large ledger, written directly in the real format, for benchmarks and tests of the ledger at scale.

``write_ledger(run_dir, records=10_000_000, shards=10_000)`` writes what a finished 10,000-task hash array
leaves behind: one partitioned ledger file per shard (``p.h<shards>.<index>.<writer>.jsonl``, as
``LedgerWriter`` names them), each holding the ``done`` records of the source tasks that hash into that
shard, with every field a real record has (outputs, per-stage rows, shard, Slurm ids, host, time). Ids
are 16 hex digits like ``content_id`` gives, so a task's state can be checked against ``select``.

``flat=True`` writes the old layout instead (``<writer>.jsonl``, no partition in the name), which every
task must read in full: the fallback for run directories written before partitions.

``write_summaries(run_dir)`` then adds what the writers keep beside each ledger file for `status`
(``ledger-summaries/``, :mod:`curator_slurm.runs.ledger_summary`), computed by the writers' own code from the
records in the files.

    python benchmarks/ledger_fixture.py RUN_DIR [--records N] [--shards S] [--flat] [--summaries]

prints the time to write, one task's start (``RunDir.state(shard)``) and a full ``load_status`` (what
``curator-slurm status`` reads).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import xxhash

from curator_slurm.runs.ledger import LEDGER_DIR, ledger_file_name, load_status
from curator_slurm.runs.rundir import RunDir
from curator_slurm.shard import ShardSpec

#: One done record, as the run loop writes it (same keys, same order, compact separators).
RECORD = (
    '{"source":"%s","status":"done","outputs":["/scratch/out/%s.parquet"],"rows_in":20,"rows_out":17,'
    '"seconds":0.0031,"attempts":1,"stages":[["jsonl_reader",0,20],["score_filter",20,17],'
    '["parquet_writer",17,17]],"shard":"%d/%d","job_id":"%d","array_job_id":"7000","array_task_id":"%d",'
    '"restart_count":0,"host":"node%03d","pid":%d,"time":1796000000.0}\n'
)


@dataclass(frozen=True)
class LedgerFixture:
    """What :func:`write_ledger` wrote: the run directory, its layout and how many records it holds."""

    run_dir: str
    records: int
    shards: int
    files: int
    bytes: int


def source_id(k: int) -> str:
    """The ``k``-th source task id: 16 hex digits, as ``content_id`` makes them."""
    return xxhash.xxh64_hexdigest(f"source-{k}".encode())


def shard_of(task_id: str, shards: int) -> int:
    """The shard a task id hashes into (the ``hash`` strategy's rule)."""
    return xxhash.xxh64_intdigest(task_id.encode()) % shards


def _writer(index: int, flat: bool) -> str:
    return f"7000_{index}-node{index % 100:03d}-{10000 + index}-{index:08x}"


def write_ledger(
    run_dir: str, records: int = 10_000_000, shards: int = 10_000, flat: bool = False, chunk: int = 500_000
) -> LedgerFixture:
    """Write ``records`` done records of a ``shards``-task hash array into ``run_dir/ledger`` (see the
    module docstring); ``chunk`` ids are hashed and appended at a time, so memory stays small."""
    directory = os.path.join(run_dir, LEDGER_DIR)
    os.makedirs(directory, exist_ok=True)
    names = [
        f"{_writer(i, flat)}.jsonl" if flat else ledger_file_name(ShardSpec.explicit(i, shards), _writer(i, flat))
        for i in range(shards)
    ]
    total = 0
    for start in range(0, records, chunk):
        parts: list[list[str]] = [[] for _ in range(shards)]
        for k in range(start, min(start + chunk, records)):
            sid = source_id(k)
            i = shard_of(sid, shards)
            parts[i].append(RECORD % (sid, sid, i, shards, 8000 + i, i, i % 100, 10000 + i))
        for i, lines in enumerate(parts):
            if lines:
                data = "".join(lines).encode()
                total += len(data)
                with open(os.path.join(directory, names[i]), "ab") as f:
                    f.write(data)
    files = sum(1 for _ in os.scandir(directory))
    return LedgerFixture(run_dir=run_dir, records=records, shards=shards, files=files, bytes=total)


def write_summaries(run_dir: str) -> int:
    """The summaries a LedgerWriter keeps beside each ledger file of ``run_dir``, made by its own
    :class:`~curator_slurm.runs.ledger_summary.SummaryKeeper` from the records in the file; how many."""
    import json

    from curator_slurm.runs.ledger import ledger_files
    from curator_slurm.runs.ledger_keeper import SummaryKeeper

    files = ledger_files(run_dir)
    for path in files:
        keeper = SummaryKeeper(path)
        with open(path, "rb") as f:
            for line in f:
                keeper.add(json.loads(line))
        keeper.commit(os.path.getsize(path))
    return len(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--flat", action="store_true", help="the old layout: no partition in the file names")
    parser.add_argument("--skip-full", action="store_true", help="do not time the full load_status")
    parser.add_argument("--summaries", action="store_true", help="also write the ledger files' summaries")
    args = parser.parse_args()
    t0 = time.perf_counter()
    if not os.path.isdir(os.path.join(args.run_dir, LEDGER_DIR)):
        fixture = write_ledger(args.run_dir, args.records, args.shards, args.flat)
        print(f"wrote {fixture.records} records in {fixture.files} files ({fixture.bytes / 1e9:.2f} GB) "
              f"in {time.perf_counter() - t0:.1f} s")  # fmt: skip
    if args.summaries:
        t0 = time.perf_counter()
        print(f"wrote {write_summaries(args.run_dir)} summaries in {time.perf_counter() - t0:.1f} s")
    run = RunDir(args.run_dir)
    for index in (0, args.shards // 2, args.shards - 1):
        shard = ShardSpec.explicit(index, args.shards)
        t0 = time.perf_counter()
        state = run.state(shard)
        print(
            f"task start, shard {index}/{args.shards}: {len(state.done)} done read in {time.perf_counter() - t0:.3f} s"
        )
    if not args.skip_full:
        t0 = time.perf_counter()
        state = load_status(args.run_dir)
        print(f"full load_status: {len(state.done)} done in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

"""The command line of ``benchmarks/run.py``: choose the rows, run each group, print the table and the
machine, and write the JSON report."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path

from curator_slurm import configure_logging

from .context import Bench
from .harness import BUSY, CpuSnapshot, Row, cache_bytecode, machine, render_table, row_from_json
from .rows import GROUPS, ROW_KEYS

DEFAULT_BENCH_DIR = "/tmp/curator-bench"


def render(paths: list[str]) -> int:
    """The table of several ``--json`` reports, each row with its ``others_busy`` note, and each report's
    machine line."""
    rows: dict[str, Row] = {}
    for path in paths:
        report = json.loads(Path(path).read_text())
        info = report["machine"]
        before, after = (info.get(f"loadavg_1min_{w}", float("nan")) for w in ("before", "after"))
        print(
            f"{path}: {report['config']['repeat']} run(s) per measurement, {report['seconds']:.0f} s, load average "
            f"{before:.2f} before, {after:.2f} after; nproc {info['nproc']} ({info['cpu']}), "
            f"Python {info['python']}, pyarrow {info['pyarrow']}"
        )
        rows.update({r["key"]: row_from_json(r) for r in report["rows"]})
    ordered = [rows[k] for k in ROW_KEYS if k in rows]
    print(render_table(ordered))
    print(targets_met(ordered))
    return 0


def targets_met(rows: list[Row]) -> str:
    targeted = [r for r in rows if r.op != "report"]
    missed = [r.key for r in targeted if not r.passed]
    return f"{len(targeted) - len(missed)} of {len(targeted)} targets met" + (
        f"; missed: {', '.join(missed)}" if missed else ""
    )


def main(argv: list[str] | None = None, description: str | None = None) -> int:
    """Run the rows ``argv`` asks for (all by default); ``description`` is the ``--help`` text (run.py's
    docstring, which lists the rows)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=120.0, help="base corpus size (default 120)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    parser.add_argument("--quick", action="store_true", help="tiny corpora, 1 repeat: a smoke test, not a record")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--rows", metavar="KEYS", help=f"comma-separated subset of rows ({','.join(ROW_KEYS)})")
    parser.add_argument("--render", nargs="+", metavar="JSON", help="run nothing: print one table of the rows of "
                        "these --json reports (runs of groups of rows), in the registry's order")  # fmt: skip
    args = parser.parse_args(argv)
    if args.render:
        return render(args.render)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    if args.quick:
        args.repeat, args.size_mb = 1, 1.0
    wanted = set(ROW_KEYS if not args.rows else args.rows.split(","))
    unknown = wanted - set(ROW_KEYS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {','.join(ROW_KEYS)}")

    configure_logging("WARNING")  # in-process pipeline runs: the table is the output, warnings still show
    root = Path(os.environ.get("CURATOR_BENCH_DIR") or DEFAULT_BENCH_DIR)
    cache_bytecode(root)
    load_before = os.getloadavg()[0]
    bench = Bench(
        root=root,
        repeat=args.repeat,
        quick=args.quick,
        size_mb=args.size_mb,
    )
    started = time.perf_counter()
    rows: list[Row] = []
    others: dict[str, float] = {}
    for group in GROUPS:
        if wanted & set(group.keys):
            before = CpuSnapshot.take()
            group_rows = [r for r in group.run(bench) if r.key in wanted]
            busy = CpuSnapshot.take().others_busy_since(before)
            for r in group_rows:
                others[r.key] = busy
                if busy is not None and busy > BUSY:
                    r.note = "; ".join(
                        filter(None, [r.note, f"other processes kept {100 * busy:.0f}% of the CPUs busy meanwhile"])
                    )
            rows += group_rows
    with contextlib.suppress(OSError):
        (bench.root / "out").rmdir()  # only if empty: another bench run may be using it
    total = time.perf_counter() - started

    info = machine()
    base = bench.corpora.get("base")
    print()
    print(
        f"curator-slurm benchmark: {args.repeat} run(s) per measurement ({bench.micro_repeat} for row 4, "
        f"{bench.select_repeat} for row 5, {bench.pairs} pairs for row 3); medians unless a note says otherwise"
        + (f", base corpus {base.size} in {len(base.files)} files" if base else "")
        + (" [QUICK: smoke test, not a record]" if args.quick else "")
    )
    print(render_table(rows))
    print()
    info["loadavg_1min_before"] = load_before
    info["loadavg_1min_after"] = os.getloadavg()[0]
    print(
        f"machine: nproc {info['nproc']} ({info['cpu']}), Python {info['python']}, pyarrow {info['pyarrow']}, "
        f"xxhash {info['xxhash']}, {info['platform']}; load average {load_before:.2f} before the run, "
        f"{info['loadavg_1min_after']:.2f} after; {total:.0f} s in total"
    )
    if load_before > 0.5:
        print("warning: the machine was busy before the run started; timings may be inflated")
    print(targets_met(rows))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "machine": info,
            "config": {
                "repeat": args.repeat,
                "micro_repeat": bench.micro_repeat,
                "select_repeat": bench.select_repeat,
                "row3_pairs": bench.pairs,
                "quick": args.quick,
                "size_mb": args.size_mb,
                "bench_dir": str(bench.root),
                "corpora": {k: {"path": str(c.path), "files": len(c.files), "bytes": c.bytes} for k, c in
                            bench.corpora.items()},
            },
            "seconds": total,
            "rows": [{**r.to_json(), "others_busy": others.get(r.key)} for r in rows],
        }  # fmt: skip
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    return 0

"""`make scale` (not in CI): takeover and the run directory at array sizes a laptop run never reaches.

1. A real array of ``--array-tasks`` (default 1,100: over the local cluster's MaxArraySize of 1001, so `submit`
   splits it) of the demo job (examples/curate.py) over as many small files, submitted at the lowest priority
   (``--nice``) so that other users of the cluster go first. Checked exactly once (one done record per source
   task, the outputs byte for byte those of an unsharded run); recorded: planning time (`submit`, which lists the
   input, writes the manifest and submits), the scheduler's overhead per task, `status` time, claim files.
2. A simulated array of ``--simulated`` processes (default 10,000, ten source tasks each): the ledger and the
   takeover claims of every process exercised in this process, in the order they would start, the last 1 % left
   holding their first group (stragglers) while 100 finished processes take over their other groups. Recorded:
   a process's start-up (ledger read, registration) at the first and the last shards, claim files and bytes, and
   the time of a taker's search.

python benchmarks/scale.py [--array-tasks N] [--simulated N (0: none)] [--skip-slurm] [--json PATH] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from curator_slurm.runs.claims import ClaimBoard, Holder, holding
from curator_slurm.runs.layout import TAKEOVER_DIR
from curator_slurm.runs.ledger import LedgerWriter, iter_records, load_status
from curator_slurm.runs.queue import WorkQueue
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.runs.sharding import hash_assignment
from curator_slurm.runs.takeover import ShardLists, Takeover, claim_namespace, group_bounds
from curator_slurm.samples.corpus import make_corpus
from curator_slurm.settings import job_environment
from curator_slurm.shard import ShardSpec
from curator_slurm.tasks import Task, content_id

REPO = Path(__file__).resolve().parents[1]
CURATE = REPO / "examples" / "curate.py"
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL"}


def say(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def tree(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.parquet"))}


def claim_files(run_dir: Path) -> dict[str, int]:
    """Files, directories and bytes under ``run_dir/takeover``."""
    files = dirs = size = 0
    for _, subdirs, names in os.walk(run_dir / TAKEOVER_DIR):
        dirs += len(subdirs)
        files += len(names)
        size += sum(os.path.getsize(os.path.join(_, n)) for n in names)
    return {"files": files, "directories": dirs, "bytes": size}


# --- 1. a real array ---------------------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "curator_slurm.cli", *args], capture_output=True, text=True,
                          env=job_environment(), timeout=3600)  # fmt: skip


def task_times(jobs: list[str]) -> list[tuple[str, str, float, float]]:
    """(task, state, start, end) of every array task of ``jobs`` (Unix seconds, as squeue gives them)."""
    out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(jobs), "-o", "%i %T %S %e"],
                         capture_output=True, text=True, check=True, timeout=120).stdout  # fmt: skip
    rows = []
    for line in out.splitlines():
        task, state, start, end = line.split()

        def stamp(text: str) -> float:
            return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")) if text[:1].isdigit() else float("nan")

        rows.append((task, state, stamp(start), stamp(end)))
    return rows


def slurm_array(root: Path, n: int) -> dict[str, Any]:
    corpus, out, reference = root / f"corpus-{n}", root / "out", root / "reference"
    if not corpus.exists():
        say(f"making {n} input files")
        make_corpus(str(corpus), files=n, docs_per_file=20, seed=11)
    if not reference.exists():
        say("the unsharded reference run")
        subprocess.run([sys.executable, str(CURATE), "--input", str(corpus), "--output", str(reference),
                        "--workers", "1"], check=True, capture_output=True, env=job_environment())  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)
    say(f"submitting {n} shards")
    start = time.time()
    submitted = cli("submit", str(CURATE), "--shards", str(n), "--json", "--sbatch-arg=--nice=10000", "--",
                    "--input", str(corpus), "--output", str(out), "--workers", "1")  # fmt: skip
    planning = time.time() - start
    if submitted.returncode != 0:
        raise SystemExit(f"submit failed: {submitted.stderr}")
    jobs = [str(a["job_id"]) for a in json.loads(submitted.stdout)["arrays"]]
    say(f"submitted as arrays {', '.join(jobs)} in {planning:.1f} s; waiting")
    while True:
        rows = task_times(jobs)
        finished = sum(1 for _, state, _, _ in rows if state in FINAL)
        if len(rows) == n and finished == n:
            break
        say(f"{finished} of {n} array tasks ended")
        time.sleep(30)
    states = Counter(state for _, state, _, _ in rows)
    run_dir = out / DEFAULT_RUN_DIR_NAME
    started = time.perf_counter()
    status = cli("status", str(run_dir), "--json")
    status_seconds = time.perf_counter() - started
    started = time.perf_counter()
    cli("status", str(run_dir))
    status_text_seconds = time.perf_counter() - started
    done = [r for r in iter_records(str(run_dir)) if r["status"] == "done"]
    once = len(done) == len({r["source"] for r in done}) == n
    same = tree(out) == tree(reference)
    first, last = min(r[2] for r in rows), max(r[3] for r in rows)
    elapsed = statistics.mean(end - begin for _, _, begin, end in rows)
    work = statistics.mean(r["seconds"] for r in done)
    slots = int(subprocess.run(["scontrol", "show", "node", "-o"], capture_output=True, text=True).stdout
                .split("CPUTot=")[1].split()[0])  # fmt: skip
    return {
        "tasks": n,
        "arrays": jobs,
        "states": dict(states),
        "exactly_once": once,
        "outputs_equal_unsharded": same,
        "planning_seconds": round(planning, 2),
        "array_wall_seconds": round(last - first, 1),
        "slots": slots,
        "mean_task_elapsed_seconds": round(elapsed, 2),
        "mean_task_work_seconds": round(work, 3),
        "scheduler_overhead_per_task_seconds": round((last - first) * slots / n - elapsed, 2),
        "process_overhead_per_task_seconds": round(elapsed - work, 2),
        "status_json_seconds": round(status_seconds, 2),
        "status_text_seconds": round(status_text_seconds, 2),
        "takeover": json.loads(status.stdout).get("takeover") if status.returncode == 0 else status.stderr,
        "claims": claim_files(run_dir),
    }


# --- 2. a simulated array ----------------------------------------------------------------------------------


def simulated(root: Path, shards: int, per_shard: int = 10, takers: int = 100) -> dict[str, Any]:
    run_dir = root / "simulated"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    tasks = [Task(task_id=content_id(f"task {i}"), metadata={"bytes": 1000}) for i in range(shards * per_shard)]
    owners = hash_assignment([t.task_id for t in tasks], shards)
    mine: dict[int, list[Task]] = {}
    for task, owner in zip(tasks, owners, strict=True):
        mine.setdefault(owner, []).append(task)
    stragglers = set(range(shards - max(1, shards // 100), shards))
    startup: list[float] = []
    say(f"simulating {shards} processes over {len(tasks)} source tasks ({len(stragglers)} stragglers)")
    with ExitStack() as alive:
        for s in range(shards):
            spec = ShardSpec.explicit(s, shards)
            started = time.perf_counter()
            own = mine.get(s, [])
            done = load_status(str(run_dir), spec, [t.task_id for t in own]).done
            holder = Holder.of(spec)
            board = ClaimBoard(str(run_dir), claim_namespace(spec), holder)
            with ExitStack() as run:  # a straggler's run goes on (it holds its first group) after the loop
                (alive if s in stragglers else run).enter_context(holding(holder))
                queue = WorkQueue((), Takeover(str(run_dir), board, ShardLists(spec, tasks, own=own), done))
                startup.append(time.perf_counter() - started)
                writer = LedgerWriter(str(run_dir), spec, sync="fsync")
                for task in queue.take(1) if s in stragglers else queue:  # a straggler: its first task only
                    writer.write({"source": task.task_id, "status": "done"}, partition=queue.taken.get(task.task_id))
                writer.close()
                if s not in stragglers:
                    queue.finish()
            if s % 1000 == 999:
                say(f"{s + 1} processes")
        searches: list[float] = []
        taken = 0
        for t in range(takers):  # finished processes coming back to help
            spec = ShardSpec.explicit(t, shards)
            holder = Holder.of(spec)
            board = ClaimBoard(str(run_dir), claim_namespace(spec), holder)
            with holding(holder):
                lists = ShardLists(spec, tasks, own=mine.get(t, []))
                takeover = Takeover(str(run_dir), board, lists, {x.task_id for x in mine.get(t, [])})
                writer = LedgerWriter(str(run_dir), spec, sync="fsync")
                while True:
                    started = time.perf_counter()
                    work = takeover.steal()
                    searches.append(time.perf_counter() - started)
                    if work is None:
                        break
                    for task in work.tasks:
                        writer.write({"source": task.task_id, "status": "done", "taken_from": work.shard},
                                     partition=work.shard)  # fmt: skip
                        taken += 1
                writer.close()
    state = load_status(str(run_dir))
    held = sum(len(group_bounds(len(mine.get(s, [])))[0]) - 1 for s in stragglers if mine.get(s))
    head, tail = startup[:100], startup[-100:]
    return {
        "processes": shards,
        "source_tasks": len(tasks),
        "stragglers": len(stragglers),
        "left_undone": len(tasks) - len(state.done),
        "held_by_stragglers": held,
        "exactly_once": state.records == len(state.done),
        "done_records": state.records,
        "taken_over": taken,
        "startup_ms_first_100": round(1000 * statistics.median(head), 2),
        "startup_ms_last_100": round(1000 * statistics.median(tail), 2),
        "startup_ms_max": round(1000 * max(startup), 2),
        "search_ms_median": round(1000 * statistics.median(searches), 2),
        "search_ms_max": round(1000 * max(searches), 2),
        "searches": len(searches),
        "claims": claim_files(run_dir),
        "ledger_files": len(os.listdir(run_dir / "ledger")),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--array-tasks", type=int, default=1100)
    parser.add_argument("--simulated", type=int, default=10_000)
    parser.add_argument("--skip-slurm", action="store_true", help="only the simulated array")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--dir", default=os.environ.get("CURATOR_SCALE_DIR", "/tmp/curator-scale"))
    args = parser.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    if args.simulated:
        report["simulated"] = simulated(root, args.simulated)
        print(json.dumps(report, indent=1), flush=True)
    if not args.skip_slurm:
        report["array"] = slurm_array(root, args.array_tasks)
        print(json.dumps(report["array"], indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    sim, array = report.get("simulated"), report.get("array")
    ok = sim is None or (sim["exactly_once"] and sim["left_undone"] == sim["held_by_stragglers"])
    return 0 if ok and (array is None or (array["exactly_once"] and array["outputs_equal_unsharded"])) else 1


if __name__ == "__main__":
    sys.exit(main())

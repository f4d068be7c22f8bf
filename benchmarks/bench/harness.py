"""What every row shares: a measure and its median, a row and its ratio against a target, the table;
child processes run through a small launcher that reports their own rusage, in an environment with no
Slurm or curator variables; fresh output directories; interleaving (:func:`rotated`); and how busy the
machine was."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import xxhash

import curator_slurm
import curator_slurm.samples.corpus
from curator_slurm.settings import job_environment

#: A measure whose samples spread more than this (relative to the median) gets a warning note.
NOISY = 0.25
#: Other processes keeping more than this fraction of the CPUs busy during a row get a warning note.
BUSY = 0.05


@dataclass
class Measure:
    """One side of a comparison: its samples and their median."""

    label: str
    unit: str
    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """(max - min) / median of the samples: how much to trust the median."""
        return (max(self.samples) - min(self.samples)) / self.median if self.median else 0.0


@dataclass
class Row:
    """One line of the table: ``value`` (by default a.median / b.median) against ``target``."""

    key: str
    title: str
    a: Measure
    b: Measure
    op: str  # ">=", "<=", or "report" (no target: the figure is the record)
    target: float
    value: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.value is None:
            self.value = self.a.median / self.b.median if self.b.median else math.inf

    @property
    def passed(self) -> bool:
        assert self.value is not None
        if self.op == "report":
            return True
        return self.value >= self.target if self.op == ">=" else self.value <= self.target

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "value": self.value,
            "target": self.target,
            "op": self.op,
            "passed": self.passed,
            "a": {**asdict(self.a), "median": self.a.median, "spread": self.a.spread},
            "b": {**asdict(self.b), "median": self.b.median, "spread": self.b.spread},
            "note": self.note,
        }


def fmt(value: float, unit: str) -> str:
    if unit == "docs/s":
        return f"{value:,.0f} docs/s"
    if unit == "B":
        return f"{value / 2**20:.1f} MiB"
    if unit == "ns":
        return f"{value:.0f} ns"
    if unit == "us":
        return f"{value:,.0f} us"
    if unit == "tokens/s":
        return f"{value:,.0f} tokens/s"
    if unit == "records/s":
        return f"{value:,.0f} records/s"
    if unit in ("s", "s CPU"):
        return f"{value:.3f} {unit}" if value < 1 else f"{value:.2f} {unit}"
    return f"{value:.3f}{(' ' + unit) if unit else ''}"


def cell(m: Measure) -> str:
    """A measure in the table: its median, then the spread of its samples when there is more than one."""
    spread = f" [{100 * m.spread:.0f}%]" if len(m.samples) > 1 else ""
    return f"{m.label}: {fmt(m.median, m.unit)}{spread}"


def render_table(rows: Sequence[Row]) -> str:
    """The table; "[x%]" after a median is the spread of its samples, (max - min) / median."""
    header = ("#", "measurement", "A (median [spread])", "B (median [spread])", "value", "target", "result")
    lines = [
        (
            r.key,
            r.title,
            cell(r.a),
            cell(r.b),
            f"{r.value:.3f}",
            "reported" if r.op == "report" else f"{r.op} {r.target:g}",
            "-" if r.op == "report" else "PASS" if r.passed else "MISS",
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines, strict=True)]
    out = ["  ".join(str(x).ljust(w) for x, w in zip(header, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for line in lines:
        out.append("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())
    notes = []
    for r in rows:
        notes += [f"  {r.key}: {r.note}"] if r.note else []
        notes += [
            f"  {r.key}: {m.label} samples spread over {100 * m.spread:.0f}% of their median (re-run when quieter)"
            for m in (r.a, r.b)
            if len(m.samples) > 1 and m.spread > NOISY
        ]
    if notes:
        out += ["", "notes:", *notes]
    return "\n".join(out)


def row_from_json(data: dict[str, Any]) -> Row:
    """A row as ``to_json`` wrote it (``run.py --render`` puts the tables of several runs together)."""

    def measure(m: dict[str, Any]) -> Measure:
        return Measure(m["label"], m["unit"], [float(x) for x in m["samples"]])

    return Row(data["key"], data["title"], measure(data["a"]), measure(data["b"]), data["op"], data["target"],
               value=data["value"], note=data["note"])  # fmt: skip


class BenchError(RuntimeError):
    """A measurement could not be taken (a child failed, a sanity check did not hold)."""


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cache_bytecode(root: Path) -> None:
    """Let child processes (array tasks, pool workers) start as an installed package does, from cached
    bytecode: without this, an environment with PYTHONDONTWRITEBYTECODE (or an editable install in a
    read-only tree) recompiles every curator_slurm module in every process, which is not what a
    deployment measures. The cache lives under the bench directory, never in the repository."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(root / "pycache")


@dataclass(frozen=True)
class ChildRun:
    wall: float
    cpu: float  # user + sys of the child (all its threads)
    maxrss: int  # bytes
    stdout: str
    rc: int = 0  # its exit code (negative: the signal that ended it); not 0 only with run_child(check=False)
    stderr: str = ""  # the end of its standard error, kept when it failed


@dataclass(frozen=True)
class Limits:
    """Resource limits the launcher sets on a child before it starts (setrlimit): a row whose command may
    outgrow the machine (a ledger of ten million records) stops at them instead of taking the memory of
    everything else that runs on it. ``memory`` caps its address space (RLIMIT_AS: it gets MemoryError),
    ``cpu_seconds`` its CPU time (RLIMIT_CPU: SIGXCPU ends it)."""

    memory: int | None = None
    cpu_seconds: int | None = None

    def arg(self) -> str:
        return f"{self.memory or 0}:{self.cpu_seconds or 0}"


#: Runs its arguments as a grandchild and reports that grandchild's own rusage. Measuring through this
#: small launcher, not directly from the bench process, matters for memory: Linux carries a process's
#: peak RSS across fork and exec, so a child forked straight from this (large) process would report
#: at least this process's RSS. The launcher (``python -S``, a few MB) is the only floor left.
LAUNCHER = """
import json, os, sys, time
report, cpu, limits, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
if cpu != "-":
    os.sched_setaffinity(0, {int(cpu)})
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        if limits != "-":
            import resource
            memory, seconds = (int(x) for x in limits.split(":"))
            if memory:
                resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            if seconds:
                resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 10))
        os.execv(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(report, "w") as f:
    json.dump({"rc": os.waitstatus_to_exitcode(status), "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
               "maxrss": usage.ru_maxrss * 1024}, f)
"""


def run_child(
    cmd: Sequence[str],
    extra: Mapping[str, str] | None = None,
    cpu: int | None = None,
    limits: Limits | None = None,
    check: bool = True,
) -> ChildRun:
    """Run ``cmd`` to completion and return its own wall time (fork to exit), CPU time (user + sys, all
    threads) and peak RSS, as wait4 reports them for that one process; ``cpu`` pins it to that core,
    ``limits`` bounds it. A child that fails raises :class:`BenchError`, unless ``check`` is false: then
    its exit code and the end of its standard error are returned with its figures.

    The child gets this environment without Slurm or curator variables (a bench run inside a Slurm job
    must not shard its children by accident; the library's own ``job_environment`` decides which) plus
    ``extra``: a row sets ``CURATOR_*`` variables there to make its child an array task."""
    env = job_environment(extra=extra)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "rusage.json"
        where = "-" if cpu is None else str(cpu)
        launcher = [sys.executable, "-S", "-c", LAUNCHER, str(report), where, limits.arg() if limits else "-", *cmd]
        proc = subprocess.run(launcher, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, check=False)
        out.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        usage = json.loads(report.read_text()) if report.exists() else {"rc": proc.returncode}
        failed = proc.returncode != 0 or usage["rc"] != 0
        tail = ""
        if failed:
            err.seek(0)
            tail = err.read().decode("utf-8", "replace")[-3000:]
        if failed and (check or "wall" not in usage):
            raise BenchError(f"{' '.join(cmd)} exited {usage['rc']}:\n{stdout[-1000:]}\n{tail}")
    return ChildRun(usage["wall"], usage["cpu"], usage["maxrss"], stdout, usage["rc"], tail)


@contextlib.contextmanager
def fresh_dir(path: Path) -> Iterator[Path]:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def rotated(items: Sequence[Any], k: int) -> list[Any]:
    """``items`` starting at position ``k``: alternates which side runs first from one repeat to the next."""
    k %= len(items)
    return [*items[k:], *items[:k]]


@dataclass(frozen=True)
class CpuSnapshot:
    """Machine-wide busy CPU time (/proc/stat) and this process tree's own, to tell whether anything
    else ran during a measurement (the machine may be shared)."""

    wall: float
    machine: float | None
    own: float

    @classmethod
    def take(cls) -> CpuSnapshot:
        machine = None
        with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
            idle = fields[3] + fields[4]  # idle + iowait
            machine = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
        own = sum(
            u.ru_utime + u.ru_stime
            for u in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
        )
        return cls(time.perf_counter(), machine, own)

    def others_busy_since(self, before: CpuSnapshot) -> float | None:
        """Fraction of all CPUs that other processes kept busy between ``before`` and this snapshot."""
        if self.machine is None or before.machine is None or self.wall <= before.wall:
            return None
        others = (self.machine - before.machine) - (self.own - before.own)
        return max(0.0, others) / ((self.wall - before.wall) * (os.cpu_count() or 1))


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def machine() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    return {
        "nproc": available_cores(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu or platform.processor(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "xxhash": xxhash.VERSION,
        "curator_slurm": curator_slurm.__version__,
    }

"""The performance record of curator-slurm: ``make bench`` (``python benchmarks/run.py [options]``).

Every row compares two things measured side by side in the same run (interleaved, ``--repeat`` times,
medians), divides them, and checks the ratio against a target. One table is printed at the end, with
the machine it ran on; ``--json PATH`` writes the same numbers (and every sample) for tooling.

Corpora are generated outside the repository, under ``$CURATOR_BENCH_DIR`` (default
``/tmp/curator-bench``), with :func:`curator_slurm.sample.make_corpus` (seeded, so the same options give
the same bytes on any machine), and reused when already there.

Rows:

1.  LocalExecutor(workers=1) on the demo job (examples/curate.py) vs a plain pyarrow loop doing the
    same per-file work, docs/s.
2.  LocalExecutor(workers=2) vs workers=1, docs/s.
3.  A simulated N-shard array (N processes of examples/curate.py, run one after another) vs one
    unsharded process: total CPU seconds, N = 4 and 16.
4.  An array task that is assigned no work vs ``python -c "import pyarrow.parquet"``: wall seconds.
5.  ``slurm.sharding.select`` per source task vs one ``xxhash.xxh64_intdigest`` call: ns.
6.  Balanced vs hash assignment: max/mean shard weight on lognormal task sizes, N = 16, 100, 1000.
14. An array task with nothing left to do whose shard comes from a 1,000,000-file manifest (1,000
    shards) vs row 4's task listing a 1-file corpus: wall seconds, target <= 2 s (the value is A).
7.  Peak RSS of the demo job on a 10x larger corpus (same file size, more files) vs the base corpus.
h1-h24. Each heuristic filter (NeMo Curator's 23 and SymbolRatioFilter): MB/s of its column API vs the
    same filter as a plain Python function per document, on web-like English text, one core.

Adding a row: write a function ``(Bench) -> list[Row]`` and add it to :data:`GROUPS` with the keys it
produces. The demo job is run through :func:`run_demo_job` with any executor, so a RayExecutor row
is a second executor in :func:`bench_executor`; a ledger row is a group that runs the demo job twice
on one run directory and compares the re-run with a fresh run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import gc
import importlib.util
import inspect
import json
import math
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq
import xxhash

import curator_slurm
import curator_slurm.sample
from curator_slurm import LocalExecutor, Pipeline, ShardSpec, configure_logging
from curator_slurm.backends.base import BaseExecutor
from curator_slurm.cli import shard_loads
from curator_slurm.runs.sharding import select, shard_of
from curator_slurm.sample import make_corpus
from curator_slurm.stages import FilePartitioningStage
from curator_slurm.tasks import EmptyTask, FileGroupTask, Task, content_id

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "curate.py"
DEFAULT_BENCH_DIR = "/tmp/curator-bench"

#: The demo job's settings (examples/curate.py): the plain loop below must do exactly this work.
MIN_WORDS = 50
MAX_WORDS = 100_000  # WordCountFilter's default upper bound
MAX_SYMBOL_RATIO = 0.25
#: Whitespace as str.split() sees it (the filters' definition; pyarrow's \s alone is ASCII-only).
SPACE = r"\s\x0b\x1c-\x1f\x85\p{Z}"
#: The JSON block size the framework's reader uses (curator_slurm.stages.readers._JSON_BLOCK_SIZE);
#: the plain loop uses the same so that the comparison measures the framework, not a read option.
JSON_BLOCK_SIZE = 16 << 20
#: About what one make_corpus document weighs, to size a corpus in MB.
BYTES_PER_DOC = 1190
#: A measure whose samples spread more than this (relative to the median) gets a warning note.
NOISY = 0.25
#: Other processes keeping more than this fraction of the CPUs busy during a row get a warning note.
BUSY = 0.05
#: What every process of the demo job imports whatever the framework does: the floor of row 3.
BARE_IMPORTS = "import pyarrow.json, pyarrow._compute, pyarrow._parquet"


# ----------------------------------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------------------------------


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
    if unit == "records/s":
        return f"{value:,.0f} records/s"
    if unit in ("s", "s CPU"):
        return f"{value:.3f} {unit}" if value < 1 else f"{value:.2f} {unit}"
    return f"{value:.3f}{(' ' + unit) if unit else ''}"


def render_table(rows: Sequence[Row]) -> str:
    header = ("#", "measurement", "A (median)", "B (median)", "value", "target", "result")
    lines = [
        (
            r.key,
            r.title,
            f"{r.a.label}: {fmt(r.a.median, r.a.unit)}",
            f"{r.b.label}: {fmt(r.b.median, r.b.unit)}",
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


class BenchError(RuntimeError):
    """A measurement could not be taken (a child failed, a sanity check did not hold)."""


# ----------------------------------------------------------------------------------------------------
# corpora
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusSpec:
    """A make_corpus corpus; the directory name encodes every argument, so reuse is safe."""

    files: int
    docs_per_file: int
    seed: int = 0

    @property
    def name(self) -> str:
        return f"jsonl-f{self.files}-d{self.docs_per_file}-s{self.seed}-g{GENERATOR}"


@dataclass(frozen=True)
class Corpus:
    path: Path
    spec: CorpusSpec
    files: list[Path]
    bytes: int

    @property
    def mb(self) -> float:
        return self.bytes / 1e6

    @property
    def size(self) -> str:
        return f"{self.mb:.0f} MB" if self.mb >= 10 else f"{self.mb:.1f} MB"


MARKER = ".complete"  # hidden: the framework's file listing skips it
#: Which version of the generator made a corpus: a change to curator_slurm.sample makes new corpora
#: instead of silently reusing ones it would no longer produce.
GENERATOR = content_id(inspect.getsource(curator_slurm.sample))[:8]


def ensure_corpus(root: Path, spec: CorpusSpec) -> Corpus:
    """The corpus for ``spec`` under ``root``, generated (into a temporary directory renamed into place,
    so an interrupted run never leaves a half corpus that looks complete) unless already there."""
    path = root / spec.name
    if not (path / MARKER).exists():
        progress(f"generating corpus {spec.name} (~{spec.files * spec.docs_per_file * BYTES_PER_DOC / 1e6:.0f} MB)")
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}.tmp-", dir=root))
        try:
            make_corpus(str(tmp), files=spec.files, docs_per_file=spec.docs_per_file, seed=spec.seed)
            (tmp / MARKER).write_text(json.dumps(asdict(spec)) + "\n")
            if path.exists():  # an incomplete leftover
                shutil.rmtree(path)
            try:
                tmp.rename(path)
            except OSError:
                if not (path / MARKER).exists():  # not a concurrent run that finished first
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    files = sorted(path.glob("*.jsonl"))
    if len(files) != spec.files:
        raise BenchError(f"{path}: expected {spec.files} files, found {len(files)}; delete it to regenerate")
    return Corpus(path=path, spec=spec, files=files, bytes=sum(f.stat().st_size for f in files))


def corpus_for_mb(size_mb: float, docs_per_file: int, min_files: int = 1) -> CorpusSpec:
    files = max(min_files, round(size_mb * 1e6 / (docs_per_file * BYTES_PER_DOC)))
    return CorpusSpec(files=files, docs_per_file=docs_per_file)


# ----------------------------------------------------------------------------------------------------
# running things
# ----------------------------------------------------------------------------------------------------


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without Slurm or curator variables (a bench run inside a Slurm job must not
    shard its children by accident), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CURATOR_"))}
    env.update(extra or {})
    return env


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


#: Runs its arguments as a grandchild and reports that grandchild's own rusage. Measuring through this
#: small launcher, not directly from the bench process, matters for memory: Linux carries a process's
#: peak RSS across fork and exec, so a child forked straight from this (large) process would report
#: at least this process's RSS. The launcher (``python -S``, a few MB) is the only floor left.
LAUNCHER = """
import json, os, sys, time
report, cpu, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
if cpu != "-":
    os.sched_setaffinity(0, {int(cpu)})
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(report, "w") as f:
    json.dump({"rc": os.waitstatus_to_exitcode(status), "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
               "maxrss": usage.ru_maxrss * 1024}, f)
"""


def run_child(cmd: Sequence[str], env: dict[str, str], cpu: int | None = None) -> ChildRun:
    """Run ``cmd`` to completion and return its own wall time (fork to exit), CPU time (user + sys, all
    threads) and peak RSS, as wait4 reports them for that one process; ``cpu`` pins it to that core."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "rusage.json"
        launcher = [sys.executable, "-S", "-c", LAUNCHER, str(report), "-" if cpu is None else str(cpu), *cmd]
        proc = subprocess.run(launcher, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, check=False)
        out.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        usage = json.loads(report.read_text()) if report.exists() else {"rc": proc.returncode}
        if proc.returncode != 0 or usage["rc"] != 0:
            err.seek(0)
            tail = err.read().decode("utf-8", "replace")[-3000:]
            raise BenchError(f"{' '.join(cmd)} exited {usage['rc']}:\n{stdout[-1000:]}\n{tail}")
    return ChildRun(wall=usage["wall"], cpu=usage["cpu"], maxrss=usage["maxrss"], stdout=stdout)


def curate_cmd(input_dir: Path, output_dir: Path, workers: int = 1) -> list[str]:
    return [
        sys.executable,
        str(EXAMPLE),
        "--input",
        str(input_dir),
        "--output",
        str(output_dir),
        "--workers",
        str(workers),
    ]


def run_curate(corpus: Corpus, output_dir: Path, workers: int) -> JobRun:
    """``examples/curate.py --workers N`` as a user runs it: a fresh process, timed from its start to its exit."""
    child = run_child(curate_cmd(corpus.path, output_dir, workers), clean_env())
    summary = re.search(r"curate: (\d+) files written, (\d+) docs in, (\d+) docs out", child.stdout)
    if summary is None:
        raise BenchError(f"curate.py --workers {workers} printed no summary line:\n{child.stdout[-1000:]}")
    files, docs_in, docs_out = map(int, summary.groups())
    return JobRun(child.wall, docs_in, docs_out, files)


@contextlib.contextmanager
def fresh_dir(path: Path) -> Iterator[Path]:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@functools.cache
def _load_example() -> Any:
    """examples/curate.py as a module, so the in-process rows run exactly the demo job's pipeline."""
    spec = importlib.util.spec_from_file_location("curator_bench_demo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def demo_pipeline(input_dir: Path, output_dir: Path) -> Pipeline:
    """The demo job of examples/curate.py with its default settings (one file per source task)."""
    return _load_example().build_pipeline(str(input_dir), str(output_dir), MIN_WORDS, 1)


@dataclass(frozen=True)
class JobRun:
    seconds: float
    docs_in: int
    docs_out: int
    files_out: int

    @property
    def docs_per_s(self) -> float:
        return self.docs_in / self.seconds


def run_demo_job(executor: BaseExecutor, corpus: Corpus, output_dir: Path) -> JobRun:
    """The demo job, unsharded, on ``executor``, timed from build to the last file written."""
    start = time.perf_counter()
    result = demo_pipeline(corpus.path, output_dir).run(executor, shard=ShardSpec.single())
    seconds = time.perf_counter() - start
    return JobRun(seconds, result.rows_in, result.rows_out, len(result.output_files))


def plain_loop(corpus: Corpus, output_dir: Path) -> JobRun:
    """What a user would write by hand for the demo job: per input file, read the JSONL, apply the same
    pyarrow.compute kernels the two filters use (word count kept as a column, as score_field does),
    write one snappy Parquet file. No framework, no temporary names, no fsync, no validation."""
    start = time.perf_counter()
    read_options = pj.ReadOptions(block_size=JSON_BLOCK_SIZE)
    docs_in = docs_out = 0
    for path in corpus.files:
        table = pj.read_json(str(path), read_options=read_options)
        docs_in += table.num_rows
        # WordCountFilter(min_words=50), score_field="word_count"
        trimmed = pc.utf8_trim_whitespace(pc.fill_null(table.column("text"), ""))
        words = pc.if_else(
            pc.equal(pc.utf8_length(trimmed), 0), 0, pc.list_value_length(pc.utf8_split_whitespace(trimmed))
        )
        keep = pc.and_(pc.and_(pc.is_valid(words), pc.greater_equal(words, MIN_WORDS)), pc.less_equal(words, MAX_WORDS))
        table = table.append_column("word_count", words).filter(keep)
        # SymbolRatioFilter(max_symbol_ratio=0.25)
        texts = pc.fill_null(table.column("text"), "")
        visible = pc.utf8_length(pc.replace_substring_regex(texts, f"[{SPACE}]+", ""))
        symbols = pc.utf8_length(pc.replace_substring_regex(texts, f"[\\p{{L}}\\p{{N}}{SPACE}]+", ""))
        ratio = pc.divide(pc.cast(symbols, pa.float64()), pc.cast(pc.max_element_wise(visible, 1), pa.float64()))
        table = table.filter(pc.and_(pc.is_valid(ratio), pc.less_equal(ratio, MAX_SYMBOL_RATIO)))
        pq.write_table(table, str(output_dir / (path.stem + ".parquet")), compression="snappy")
        docs_out += table.num_rows
    return JobRun(time.perf_counter() - start, docs_in, docs_out, len(corpus.files))


def rotated(items: Sequence[Any], k: int) -> list[Any]:
    """``items`` starting at position ``k``: alternates which side runs first from one repeat to the next."""
    k %= len(items)
    return [*items[k:], *items[:k]]


# ----------------------------------------------------------------------------------------------------
# the benchmark
# ----------------------------------------------------------------------------------------------------


@dataclass
class Bench:
    root: Path
    repeat: int
    quick: bool
    size_mb: float
    notes: list[str] = field(default_factory=list)
    corpora: dict[str, Corpus] = field(default_factory=dict)

    @property
    def docs_per_file(self) -> int:
        return 20 if self.quick else 1000

    @property
    def micro_repeat(self) -> int:
        """Repeats for rows that take a second or less: more samples tame process-start jitter."""
        return self.repeat if self.quick else max(self.repeat, 5)

    @property
    def select_repeat(self) -> int:
        """Repeats for row 5, whose samples take a tenth of a second."""
        return self.repeat if self.quick else max(self.repeat, 9)

    @property
    def pinned_cores(self) -> list[int]:
        """Two cores to pin row 3's sides to, or none when fewer are usable."""
        cores = sorted(os.sched_getaffinity(0))[:2] if hasattr(os, "sched_getaffinity") else []
        return cores if len(cores) == 2 else []

    @property
    def pairs(self) -> int:
        """Row 3's pairs: ``repeat`` with the shards on each core when the sides swap cores (so each side
        has each core as often, and each core's median is a median of ``repeat``), else ``repeat``."""
        return 2 * self.repeat if self.pinned_cores else self.repeat

    def corpus(self, role: str) -> Corpus:
        """The corpus for a role; each is generated once and shared by every row that names it."""
        if role not in self.corpora:
            specs = {
                "base": corpus_for_mb(self.size_mb, self.docs_per_file, min_files=64 if self.quick else 1),
                # Row 3 needs enough source tasks that every one of 16 shards gets some, and enough work
                # per shard (about 50 MB) that a shard is more than the start of a Python process.
                "sharded": corpus_for_mb(self.size_mb if self.quick else 800, self.docs_per_file, min_files=64),
                "one-file": CorpusSpec(files=1, docs_per_file=self.docs_per_file),
                "rss-small": corpus_for_mb(0.2 if self.quick else 20, self.docs_per_file, min_files=2),
            }
            specs["rss-large"] = CorpusSpec(files=10 * specs["rss-small"].files, docs_per_file=self.docs_per_file)
            self.corpora[role] = ensure_corpus(self.root / "corpora", specs[role])
        return self.corpora[role]

    def out(self, name: str) -> Path:
        return self.root / "out" / f"{os.getpid()}-{name}"

    _warm: bool = False

    def warm_children(self) -> None:
        """Run the demo job's child commands once, untimed, so bytecode and file caches are warm."""
        if self._warm:
            return
        progress("warming the bytecode cache for child processes (untimed)")
        corpus = self.corpus("one-file")
        with fresh_dir(self.out("warm")) as out:
            run_child(curate_cmd(corpus.path, out), clean_env())
        run_child([sys.executable, "-c", BARE_IMPORTS], clean_env())
        self._warm = True


def bench_executor(b: Bench) -> list[Row]:
    """Row 1: the demo job in this process on LocalExecutor(workers=1) against the plain loop. Row 2:
    ``curate.py --workers 2`` against ``--workers 1``, each a fresh process as a user runs it (in this
    process, which has run pyarrow's thread pools, workers could not be forked)."""
    corpus = b.corpus("base")
    progress("rows 1-2: warm-up pass (untimed: page cache, bytecode)")
    b.warm_children()
    with fresh_dir(b.out("warmup")) as out:
        run_demo_job(LocalExecutor(workers=1), corpus, out)
    runs: dict[str, list[JobRun]] = {"plain": [], "w1": [], "c1": [], "c2": []}
    contenders: list[tuple[str, Callable[[Path], JobRun]]] = [
        ("plain", lambda out: plain_loop(corpus, out)),
        ("w1", lambda out: run_demo_job(LocalExecutor(workers=1), corpus, out)),
        ("c1", lambda out: run_curate(corpus, out, 1)),
        ("c2", lambda out: run_curate(corpus, out, 2)),
    ]
    for rep in range(b.repeat):
        for name, fn in rotated(contenders, rep):
            progress(f"rows 1-2: {name}, repeat {rep + 1}/{b.repeat} ({corpus.size}, {len(corpus.files)} files)")
            with fresh_dir(b.out(name)) as out:
                runs[name].append(fn(out))
    for name, name_runs in runs.items():
        outs = {(r.docs_in, r.docs_out, r.files_out) for r in name_runs} | {
            (r.docs_in, r.docs_out, r.files_out) for r in runs["plain"]
        }
        if len(outs) != 1:
            raise BenchError(f"{name} and the plain loop disagree on (docs in, docs out, files): {sorted(outs)}")
    dps = {k: Measure(k, "docs/s", [r.docs_per_s for r in v]) for k, v in runs.items()}
    dps["plain"].label = "plain pyarrow"
    dps["w1"].label = "workers=1"
    dps["c1"].label = "--workers 1"
    dps["c2"].label = "--workers 2"
    size = f"{corpus.size}, {len(corpus.files)} files"
    small = "" if b.quick or corpus.mb >= 100 else "the demo job ran on less than 100 MB: not a record"
    return [
        Row("1", f"demo job docs/s: LocalExecutor(workers=1) / plain pyarrow loop ({size})", dps["w1"], dps["plain"],
            ">=", 0.8, note=small),
        Row("2", f"curate.py docs/s, whole process: --workers 2 / --workers 1 ({size}, {available_cores()} cores)",
            dps["c2"], dps["c1"], ">=", 1.7, note="workers start by fork (a fresh curate.py has no other thread)"),
    ]  # fmt: skip


def bench_sharded_cpu(b: Bench) -> list[Row]:
    """Row 3: N array tasks (CURATOR_SHARD_INDEX/CURATOR_NUM_SHARDS), run one after another, vs one
    unsharded process; CPU seconds summed over the children.

    The two sides of each pair run at the same time, one stream of processes per core: the CPU seconds
    of an 800 MB pass moved by 5-10 % from one minute to the next on a shared machine (32.5-38.7 s),
    more than 3b's margin, and a pair that shares the minutes shares that drift. Each side is pinned to
    its own core, and the cores swap from one pair to the next (so the number of pairs is even): one
    vCPU can be slower than the other for minutes (3a's pairs once gave 1.011 three times, and 1.05-1.07
    in another run). The value is the geometric mean of the median ratio with the shards on each core,
    in which that difference cancels; unpinned (one core available) it is the median of the ratios."""
    corpus = b.corpus("sharded")
    b.warm_children()
    counts = (4, 16)
    cores, pairs = b.pinned_cores, b.pairs
    pinned = bool(cores)
    sharded: dict[int, list[float]] = {n: [] for n in counts}
    whole: dict[int, list[float]] = {n: [] for n in counts}  # the unsharded run paired with each
    bare: list[float] = []  # CPU of a process that only imports what the demo job needs

    def one_process(out: Path, cpu: int | None) -> float:
        return run_child(curate_cmd(corpus.path, out), clean_env(), cpu).cpu

    def shards(n: int, out: Path, cpu: int | None) -> float:
        env = {"CURATOR_NUM_SHARDS": str(n)}
        return sum(
            run_child(curate_cmd(corpus.path, out), clean_env({**env, "CURATOR_SHARD_INDEX": str(i)}), cpu).cpu
            for i in range(n)
        )

    def side_cores(pair: int) -> tuple[int | None, int | None]:
        """(core of the shards, core of the unsharded process) for this pair."""
        return (cores[pair % 2], cores[1 - pair % 2]) if pinned else (None, None)

    for pair in range(pairs):
        bare += [run_child([sys.executable, "-c", BARE_IMPORTS], clean_env()).cpu for _ in range(3)]
        on_shards, on_single = side_cores(pair)
        for n in rotated(list(counts), pair):
            where = f", shards on cpu {on_shards}, 1 process on cpu {on_single}" if pinned else ""
            progress(f"row 3: {n} shards beside 1 process, pair {pair + 1}/{pairs} ({corpus.size}, "
                     f"{len(corpus.files)} files{where})")  # fmt: skip
            with fresh_dir(b.out(f"shards-{n}")) as out_n, fresh_dir(b.out("shards-1")) as out_1:
                with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                    split = pool.submit(shards, n, out_n, on_shards)
                    single = pool.submit(one_process, out_1, on_single)
                    sharded[n].append(split.result())
                    whole[n].append(single.result())
                files = [{p.name: p.stat().st_size for p in out.glob("*.parquet")} for out in (out_n, out_1)]
            if len(files[0]) != len(corpus.files) or files[0] != files[1]:
                raise BenchError(f"{n} shards wrote {len(files[0])} files for {len(corpus.files)} source tasks, "
                                 "or not the files of the unsharded run")  # fmt: skip
    start_cpu = statistics.median(bare)

    def ratios(n: int) -> list[float]:
        return [a / c for a, c in zip(sharded[n], whole[n], strict=True)]

    def value(n: int) -> float:
        if not pinned:
            return statistics.median(ratios(n))
        by_core = [statistics.median(ratios(n)[first::2]) for first in (0, 1)]
        return math.sqrt(by_core[0] * by_core[1])

    def note(n: int) -> str:
        base = statistics.median(whole[n])
        extra = (statistics.median(sharded[n]) - base) / (n - 1)
        floor = (base + (n - 1) * start_cpu) / base
        where = [f" (shards on cpu {side_cores(i)[0]})" if pinned else "" for i in range(pairs)]
        shown = [f"{r:.3f}{w}" for r, w in zip(ratios(n), where, strict=True)]
        return (
            f"pairs (each run at the same time): {', '.join(shown)}; {extra:.3f} s CPU per extra process, of "
            f'which {start_cpu:.3f} s is `python -c "{BARE_IMPORTS}"`; with nothing but that start-up added '
            f"per process the ratio would be {floor:.3f}"
        )

    return [
        Row(f"3{'ab'[k]}", f"simulated {n}-shard array: sum of CPU s / one unsharded process beside it "
            f"({corpus.size}, {len(corpus.files)} files)", Measure(f"{n} processes", "s CPU", sharded[n]),
            Measure("1 process", "s CPU", whole[n]), "<=", 1.1, value=value(n), note=note(n))
        for k, n in enumerate(counts)
    ]  # fmt: skip


def bench_empty_shard(b: Bench) -> list[Row]:
    """Row 4: the wall time of an array task that owns no source task, vs importing pyarrow.parquet."""
    corpus = b.corpus("one-file")
    count = 64
    task_id = FileGroupTask.from_paths([str(corpus.files[0])]).task_id
    owner = shard_of(task_id, count)
    index = next(i for i in range(count) if i != owner)
    env = clean_env({"CURATOR_NUM_SHARDS": str(count), "CURATOR_SHARD_INDEX": str(index)})
    empty: list[float] = []
    baseline: list[float] = []
    imports: list[float] = []  # context for the note: the framework's import alone
    sides: list[tuple[list[float], Callable[[Path], ChildRun]]] = [
        (empty, lambda out: run_child(curate_cmd(corpus.path, out), env)),
        (baseline, lambda out: run_child([sys.executable, "-c", "import pyarrow.parquet"], clean_env())),
        (imports, lambda out: run_child([sys.executable, "-c", "import curator_slurm.stages"], clean_env())),
    ]
    b.warm_children()
    for rep in range(b.micro_repeat):
        progress(f"row 4: repeat {rep + 1}/{b.micro_repeat}")
        for samples, fn in rotated(sides, rep):
            with fresh_dir(b.out("empty-shard")) as out:
                samples.append(fn(out).wall)
                wrote = list(out.glob("*.parquet"))
                if samples is empty and wrote:
                    raise BenchError(f"shard {index}/{count} was meant to get no work but wrote {wrote}")
    return [
        Row("4", f"array task with no work (shard {index}/{count} of a 1-file corpus) / import pyarrow.parquet, "
            "wall s", Measure("empty shard", "s", empty), Measure("import", "s", baseline), "<=", 2.0,
            note=f"`python -c 'import curator_slurm.stages'` alone takes {statistics.median(imports):.3f} s wall")
    ]  # fmt: skip


def planned_manifest(directory: Path, files: int, shards: int) -> tuple[float, list[str]]:
    """A manifest of ``files`` one-file source tasks (the files are not made) over ``shards`` shards, as
    `curator-slurm submit` would write for examples/curate.py over ``directory / "input"``: lognormal sizes
    around 20 kB, balanced by bytes. Returns the seconds write_manifest took and shard 0's task ids."""
    from curator_slurm.runs.manifest import SCHEMA, write_manifest

    root = str(directory / "input")
    rng = random.Random(14)
    rel = [f"d{i // 1000:04d}/part-{i:07d}.jsonl" for i in range(files)]
    sizes = [max(1, int(rng.lognormvariate(math.log(20_000), 1.0))) for _ in range(files)]
    columns = [
        [content_id(r) for r in rel],
        ["input"] * files,
        [[f"{root}/{r}"] for r in rel],
        [[n] for n in sizes],
        [json.dumps({"bytes": n, "root": root, "file_indices": [i]}) for i, n in enumerate(sizes)],
        sizes,
    ]
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, SCHEMA, strict=True)]
    table = pa.Table.from_arrays(arrays, schema=SCHEMA)
    start = time.perf_counter()
    info = write_manifest(str(directory / "manifest"), table, shards, "balanced")
    seconds = time.perf_counter() - start
    return seconds, pq.read_table(info.shard_file(0), columns=["task_id"]).column("task_id").to_pylist()


def bench_manifest_startup(b: Bench) -> list[Row]:
    """Row 14: the wall time of an array task with nothing left to do whose shard comes from a manifest of
    1,000,000 files (1,000 shards of 1,000; its tasks are recorded done in the ledger, so it reads its
    shard file, checks the run directory and ends), vs row 4's task with no work that lists a 1-file corpus.
    Target: at most 2 s, whatever the size of the manifest (the task reads only its shard's file)."""
    from curator_slurm.runs.ledger import LedgerWriter, RunDir

    files = 20_000 if b.quick else 1_000_000
    shards = files // 1000
    with fresh_dir(b.out("manifest-startup")) as work:
        progress(f"row 14: writing a manifest of {files:,} files over {shards} shards (the files are not made)")
        write_seconds, mine = planned_manifest(work, files, shards)
        out = work / "out"
        run_dir = out / ".curator-run"
        RunDir(run_dir).claim(demo_pipeline(work / "input", out).fingerprint())
        ledger = LedgerWriter(str(run_dir), ShardSpec.explicit(0, shards))
        for task_id in mine:  # shard 0 finished earlier: this task start finds nothing left to do
            ledger.write({"source": task_id, "status": "done", "outputs": [], "rows_in": 0, "rows_out": 0})
        ledger.close()
        env = clean_env(
            {"CURATOR_MANIFEST": str(work / "manifest"), "CURATOR_NUM_SHARDS": str(shards), "CURATOR_SHARD_INDEX": "0"}
        )
        corpus = b.corpus("one-file")
        owner = shard_of(FileGroupTask.from_paths([str(corpus.files[0])]).task_id, 64)
        listing_env = clean_env({"CURATOR_NUM_SHARDS": "64", "CURATOR_SHARD_INDEX": str((owner + 1) % 64)})
        b.warm_children()
        # Untimed: writes sources.json once. The input directory does not exist, so a task that listed
        # it instead of loading the manifest would fail (and the bench with it).
        run_child(curate_cmd(work / "input", out), env)
        manifest: list[float] = []
        listing: list[float] = []
        sides: list[tuple[list[float], Callable[[], ChildRun]]] = [
            (manifest, lambda: run_child(curate_cmd(work / "input", out), env)),
            (listing, lambda: run_child(curate_cmd(corpus.path, work / "listing-out"), listing_env)),
        ]
        for rep in range(b.micro_repeat):
            progress(f"row 14: repeat {rep + 1}/{b.micro_repeat}")
            for samples, fn in rotated(sides, rep):
                samples.append(fn().wall)
        if list(out.glob("*.parquet")):
            raise BenchError("row 14: the task was meant to find nothing left to do but wrote outputs")
    return [
        Row("14", f"array task with nothing left to do, its shard from a {files:,}-file manifest ({shards:,} "
            "shards), wall s (value: A)", Measure("manifest", "s", manifest), Measure("1-file listing (row 4)", "s",
            listing), "<=", 2.0, value=statistics.median(manifest),
            note=f"writing the manifest at submit took {write_seconds:.1f} s ({files:,} tasks, balanced)")
    ]  # fmt: skip


def bench_select(b: Bench) -> list[Row]:
    """Row 5: ns per source task of the shard filter vs ns of the hash call it cannot avoid.

    The value compares the fastest sample of each side, as ``timeit`` advises for timings this short:
    on a shared machine noise only ever adds time, and single samples here spread by 30-80 %."""
    n = 100_000 if b.quick else 1_000_000
    progress(f"row 5: building {n:,} source tasks")
    # Like the partitioner's FileGroupTasks (a content id, a size in metadata) without touching files.
    tasks: list[Task] = [
        Task(task_id=content_id(f"/data/corpus/part-{i:07d}.jsonl"), metadata={"bytes": 1_000_000 + i % 9973})
        for i in range(n)
    ]
    ids = [t.task_id.encode("utf-8") for t in tasks]
    spec = ShardSpec.explicit(index=7, count=1000)
    h = xxhash.xxh64_intdigest
    per_select, per_hash = [], []
    gc.collect()
    kept: list[Task] = []

    def time_select() -> None:
        nonlocal kept
        start = time.perf_counter_ns()
        kept = select(tasks, spec)
        per_select.append((time.perf_counter_ns() - start) / n)

    def time_hash() -> None:
        start = time.perf_counter_ns()
        for tid in ids:
            h(tid)
        per_hash.append((time.perf_counter_ns() - start) / n)

    repeat = b.select_repeat
    for rep in range(repeat):  # a fraction of a second each: more samples, alternating order
        progress(f"row 5: repeat {rep + 1}/{repeat}")
        for measure in rotated([time_select, time_hash], rep):
            measure()
        if not 0 < len(kept) < n:
            raise BenchError(f"select kept {len(kept)} of {n}")
    fastest = f"fastest of {repeat}: select {min(per_select):.0f} ns, xxh64 {min(per_hash):.0f} ns"
    return [
        Row("5", f"shard filter: select() ns per source task / one xxh64_intdigest call ({n:,} tasks)",
            Measure("select", "ns", per_select), Measure("xxh64", "ns", per_hash), "<=", 3.0,
            value=min(per_select) / min(per_hash), note=f"value from the {fastest} (medians in the table)")
    ]  # fmt: skip


def max_over_mean(ids: list[str], weights: Sequence[float], count: int, strategy: str) -> float:
    """Heaviest shard's weight over the mean shard's under ``strategy``, as `curator-slurm plan` reports it."""
    loads = [w for _, w in shard_loads([[i, w] for i, w in zip(ids, weights, strict=True)], count, strategy)]
    return max(loads) / (sum(loads) / count)


def bench_balance(b: Bench) -> list[Row]:
    """Row 6: max/mean shard weight, balanced and hash, on lognormal task weights (sigma 1.5)."""
    per_shard = 20
    rows = []
    for k, count in enumerate((16, 100, 1000)):
        rng = random.Random(0)
        weights = [rng.lognormvariate(0.0, 1.5) for _ in range(per_shard * count)]
        ids = [content_id(f"task-{i}") for i in range(len(weights))]
        figures = {name: max_over_mean(ids, weights, count, name) for name in ("balanced", "hash")}
        bound = max(1.0, max(weights) / (sum(weights) / count))
        balanced = Measure("balanced", "", [figures["balanced"]])
        rows.append(
            Row(
                f"6{'abc'[k]}",
                f"max/mean shard weight ÷ best possible, N={count}, {per_shard} lognormal(sigma=1.5) tasks/shard",
                balanced,
                Measure("hash", "", [figures["hash"]]),
                "<=",
                1.05,
                value=figures["balanced"] / bound,
                note=f"A and B are max/mean; no assignment of whole tasks goes below {bound:.3f} here (the largest "
                "task outweighs a mean shard), so the value is balanced's max/mean divided by that"
                if bound > 1.0
                else "",
            )
        )
    rows.append(bench_split_balance(b, per_shard))
    return rows


def sparse_lognormal_files(root: Path, count: int, sigma: float, median: int) -> Path:
    """``count`` JSONL-named sparse files (no data blocks, never read) with lognormal sizes: real
    files for the partitioner to list and cut, made in a second or two and reused."""
    path = root / f"sparse-lognormal-n{count}-s{sigma}-m{median}"
    if not (path / MARKER).exists():
        progress(f"row 6d: making {count:,} sparse files with lognormal sizes")
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        rng = random.Random(0)
        for i in range(count):
            with open(path / f"part-{i:06d}.jsonl", "wb") as f:
                f.truncate(max(1, round(median * rng.lognormvariate(0.0, sigma))))
        (path / MARKER).write_text("")
    return path


def bench_split_balance(b: Bench, per_shard: int) -> Row:
    """Row 6d: the remedy when whole files cannot be balanced: the partitioner cuts the large files
    (split_files, blocksize = the mean file size, so a piece is at most 1/20 of a mean shard) and the
    balanced strategy assigns the pieces. Real (sparse) files, listed and cut by FilePartitioningStage."""
    count = 100 if b.quick else 1000
    root = sparse_lognormal_files(b.root / "corpora", per_shard * count, 1.5, 1 << 20)
    sizes = [p.stat().st_size for p in root.glob("*.jsonl")]
    blocksize = sum(sizes) // len(sizes)
    figures = {}
    for name, split in (("whole files", False), ("split", True)):
        tasks = FilePartitioningStage(str(root), blocksize=blocksize if split else None, split_files=split).process(
            EmptyTask()
        )
        ids, weights = [t.task_id for t in tasks], [t.metadata["bytes"] for t in tasks]
        figures[name] = (max_over_mean(ids, weights, count, "balanced"), len(tasks))
    return Row(
        "6d",
        f"max/mean shard bytes, N={count}, {per_shard} lognormal(sigma=1.5) files/shard, split at the mean file size",
        Measure(f"split ({figures['split'][1]:,} tasks)", "", [figures["split"][0]]),
        Measure(f"whole files ({figures['whole files'][1]:,})", "", [figures["whole files"][0]]),
        "<=",
        1.05,
        value=figures["split"][0],
        note="JsonlReader(blocksize=..., split_files=True): files over blocksize become byte-range source tasks",
    )


def bench_rss(b: Bench) -> list[Row]:
    """Row 7: peak RSS of the demo job (fresh process, workers=1) on a 10x larger corpus of same-size files."""
    small, large = b.corpus("rss-small"), b.corpus("rss-large")
    b.warm_children()
    rss: dict[str, list[float]] = {"small": [], "large": []}
    for rep in range(b.repeat):
        for name, corpus in rotated([("small", small), ("large", large)], rep):
            progress(f"row 7: {name} ({corpus.size}), repeat {rep + 1}/{b.repeat}")
            with fresh_dir(b.out(f"rss-{name}")) as out:
                rss[name].append(run_child(curate_cmd(corpus.path, out), clean_env()).maxrss)
    return [
        Row("7", f"peak RSS, LocalExecutor(workers=1): {large.size} corpus / {small.size} corpus "
            f"({len(large.files)} vs {len(small.files)} files)",
            Measure(f"{large.size}", "B", rss["large"]), Measure(f"{small.size}", "B", rss["small"]),
            "<=", 1.3)
    ]  # fmt: skip


def bench_ledger(b: Bench) -> list[Row]:
    """Row 8: what the ledger costs: one durable record per source task, and loading a million."""
    from curator_slurm.runs.ledger import LedgerWriter, load_status

    n_write = 200 if b.quick else 2000
    corpus = b.corpus("base")
    per_task: list[float] = []
    for rep in range(b.repeat):
        progress(f"row 8a: demo job for the per-task baseline, repeat {rep + 1}/{b.repeat}")
        with fresh_dir(b.out("ledger-job")) as out:
            run = run_demo_job(LocalExecutor(workers=1), corpus, out)
        per_task.append(run.seconds / len(corpus.files) * 1e6)
    write_us: list[float] = []
    record = {"source": "", "status": "done", "outputs": ["/data/out/0123456789abcdef.parquet"], "rows_in": 1000,
              "rows_out": 800, "seconds": 0.05, "attempts": 1}  # fmt: skip
    for _ in range(b.repeat):
        with fresh_dir(b.out("ledger-write")) as out:
            writer = LedgerWriter(str(out), ShardSpec.explicit(3, 16))
            start = time.perf_counter()
            for i in range(n_write):
                writer.write({**record, "source": f"{i:016x}"})
            write_us.append((time.perf_counter() - start) / n_write * 1e6)
            writer.close()

    n_load, writers = (20_000, 20) if b.quick else (1_000_000, 1000)
    progress(f"row 8b: writing a ledger of {n_load:,} records in {writers} files")
    ledger_root = b.root / "ledgers" / f"r{n_load}-w{writers}"
    ledger_dir = ledger_root / "ledger"
    if not (ledger_root / MARKER).exists():
        shutil.rmtree(ledger_root, ignore_errors=True)
        ledger_dir.mkdir(parents=True)
        per_file = n_load // writers
        for w in range(writers):
            lines = [
                json.dumps({**record, "source": content_id(f"task-{w}-{i}"), "shard": f"{w}/{writers}",
                            "array_job_id": "1000", "array_task_id": str(w), "host": "node01", "time": 1.0e9})
                for i in range(per_file)
            ]  # fmt: skip
            (ledger_dir / f"1000_{w}-node01-{w}.jsonl").write_text("\n".join(lines) + "\n")
        (ledger_root / MARKER).touch()
    load_s: list[float] = []
    naive_s: list[float] = []
    for rep in range(b.repeat):
        for name in rotated(["ours", "naive"], rep):
            progress(f"row 8b: load with {name}, repeat {rep + 1}/{b.repeat}")
            gc.collect()
            start = time.perf_counter()
            if name == "ours":
                state = load_status(str(ledger_root))
                if len(state.done) != n_load:
                    raise BenchError(f"load_status found {len(state.done)} of {n_load} records")
                load_s.append(time.perf_counter() - start)
            else:
                done = set()
                for path in sorted(ledger_dir.iterdir()):
                    with open(path, encoding="utf-8") as f:
                        for line in f:
                            r = json.loads(line)
                            if r["status"] == "done":
                                done.add(r["source"])
                naive_s.append(time.perf_counter() - start)
    rate = n_load / statistics.median(load_s)
    return [
        Row("8a", f"ledger: one fsync'd record per source task / demo job time per source task ({corpus.size})",
            Measure("record", "us", write_us), Measure("source task", "us", per_task), "report", 0.0,
            note=f"{statistics.median(write_us):,.0f} us per record, written and fsynced by the driver"),
        Row("8b", f"ledger: load {n_load:,} records from {writers} files / a json.loads loop over them",
            Measure("load_status", "s", load_s), Measure("json.loads loop", "s", naive_s), "report", 0.0,
            note=f"load_status reads {rate:,.0f} records/s"),
    ]  # fmt: skip


def bench_fuzzy_signatures(b: Bench) -> list[Row]:
    """Row 12: fuzzy dedup's signature step (normalise, 5-word shingles, 160 MinHash permutations, 20 band
    hashes; curator_slurm.dedup.minhash) over a batch of ~250-word documents, against a datasketch-style
    loop doing the same work per document and per shingle: Python normalising and splitting, one hash
    per shingle, one numpy update of the 160 minima per shingle (datasketch's ``MinHash.update``, with
    its default SHA-1 shingle hash and its ``(a * x + b) mod (2^61 - 1)`` family), then one xxhash per
    band. docs/s, interleaved, in this process."""
    import hashlib
    import unicodedata

    import numpy as np

    from curator_slurm.dedup import minhash as mh
    from curator_slurm.dedup.synthetic import near_duplicate_corpus

    docs = 200 if b.quick else 2000
    corpus = near_duplicate_corpus(unrelated=docs * 3 // 4, originals=docs // 12, copies=(2, 2), words=250, seed=0)
    texts = pa.array(corpus.texts, pa.string())
    ngram, bands, rows, seed = mh.DEFAULT_NGRAM, mh.DEFAULT_BANDS, mh.DEFAULT_ROWS, mh.DEFAULT_SEED
    num_perm = bands * rows
    prime, max_hash = np.uint64((1 << 61) - 1), np.uint64((1 << 32) - 1)
    a, c = (p % prime for p in mh.permutations(num_perm, seed))
    punctuation = re.compile(r"[^\w\s]|_")

    def vectorised() -> np.ndarray:
        offsets, hashes = mh.shingle_hashes(texts, ngram, seed)
        return mh.band_hashes(mh.minhash_signatures(offsets, hashes, num_perm, seed), bands, rows)

    def per_shingle() -> list[list[int]]:
        out = []
        for text in corpus.texts:
            words = punctuation.sub(" ", unicodedata.normalize("NFKC", text).lower()).split()
            grams = [" ".join(words[i : i + ngram]) for i in range(max(1, len(words) - ngram + 1))] if words else []
            minima = np.full(num_perm, max_hash, dtype=np.uint64)
            for gram in grams:  # datasketch's MinHash.update, one shingle at a time
                x = np.uint64(int.from_bytes(hashlib.sha1(gram.encode()).digest()[:4], "little"))
                minima = np.minimum(np.bitwise_and((a * x + c) % prime, max_hash), minima)
            sig = minima.astype(np.uint32)
            out.append([xxhash.xxh64_intdigest(sig[j * rows : (j + 1) * rows].tobytes()) for j in range(bands)])
        return out

    rates: dict[str, list[float]] = {"vectorised": [], "loop": []}
    for rep in range(b.repeat):
        for name in rotated(["vectorised", "loop"], rep):
            progress(f"row 12: {name}, {docs:,} documents, repeat {rep + 1}/{b.repeat}")
            start = time.perf_counter()
            result = vectorised() if name == "vectorised" else per_shingle()
            rates[name].append(docs / (time.perf_counter() - start))
            if len(result) != len(corpus.texts):
                raise BenchError(f"row 12: {name} gave {len(result)} signatures for {len(corpus.texts)} documents")
    return [
        Row("12", f"fuzzy dedup signatures (shingles + {num_perm} MinHash + {bands} bands), vectorised / "
            f"datasketch-style per-shingle loop ({docs:,} docs of ~250 words)",
            Measure("vectorised", "docs/s", rates["vectorised"]), Measure("loop", "docs/s", rates["loop"]), ">=", 5.0,
            note=f"vectorised: {statistics.median(rates['vectorised']):,.0f} docs/s on one core, from the text "
                 "column to the band hashes"),
    ]  # fmt: skip


def bench_ray(b: Bench) -> list[Row]:
    """Row 9: RayExecutor on the demo job vs LocalExecutor(workers=all CPUs), Ray's start-up excluded,
    with its stages fused into one pool (the default) and with a pool per stage; and what Ray's
    start-up costs."""
    try:
        import ray
    except ImportError:
        raise BenchError("ray is not installed") from None
    from curator_slurm.backends.ray import RayExecutor

    corpus = b.corpus("base")
    cores = available_cores()
    ray_dps: dict[str, list[float]] = {"ray": [], "ray-per-stage": []}
    local_dps: list[float] = []
    startup: list[float] = []
    local_walls: list[float] = []
    progress("row 9: starting Ray (untimed here; timed below from a fresh process)")
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        with fresh_dir(b.out("ray-warm")) as out:
            run_demo_job(RayExecutor(), corpus, out)
        for rep in range(b.repeat):
            for name in rotated(["ray", "local", "ray-per-stage"], rep):
                progress(f"row 9: {name}, repeat {rep + 1}/{b.repeat}")
                with fresh_dir(b.out(f"ray-{name}")) as out:
                    if name in ray_dps:
                        executor = RayExecutor(fuse=name == "ray")
                        run = run_demo_job(executor, corpus, out)
                        working = run.seconds - executor.ray_seconds - executor.actor_seconds
                        ray_dps[name].append(run.docs_in / working)
                    else:
                        local_dps.append(run_demo_job(LocalExecutor(workers=cores), corpus, out).docs_per_s)
    finally:
        ray.shutdown()
    one = b.corpus("one-file")
    b.warm_children()
    for rep in range(b.repeat):
        progress(f"row 9b: curate.py --executor ray on one file, repeat {rep + 1}/{b.repeat}")
        with fresh_dir(b.out("ray-start")) as out:
            ray_run = run_child([*curate_cmd(one.path, out), "--executor", "ray"], clean_env())
        with fresh_dir(b.out("local-start")) as out:
            local_run = run_child(curate_cmd(one.path, out), clean_env())
        startup.append(ray_run.wall - local_run.wall)
        local_walls.append(local_run.wall)
    return [
        Row("9a", f"demo job docs/s: RayExecutor / LocalExecutor(workers={cores}), Ray start-up excluded "
            f"({corpus.size})", Measure("ray", "docs/s", ray_dps["ray"]),
            Measure(f"workers={cores}", "docs/s", local_dps), ">=", 0.7,
            note="Ray's raylet and GCS run outside this process tree: the 'other processes' figure includes them"),
        Row("9b", "Ray start-up: curate.py --executor ray minus --executor local on one file, wall s",
            Measure("ray extra", "s", startup), Measure("local run", "s", local_walls), "report", 0.0,
            value=statistics.median(startup),
            note="value is seconds: starting a local Ray, its actors, and shutting it down"),
        Row("9c", "the same with a pool per stage: RayExecutor(fuse=False) / LocalExecutor, start-up excluded",
            Measure("ray per stage", "docs/s", ray_dps["ray-per-stage"]),
            Measure(f"workers={cores}", "docs/s", local_dps), "report", 0.0,
            note="what fusing the CPU stages into one pool saves: per-stage pools hand every table through "
            "Ray's object store"),
    ]  # fmt: skip


DEDUP_EXAMPLE = REPO / "examples" / "dedup.py"
#: Row 10's baseline: the same exact dedup (whitespace-normalised text, first occurrence kept) as one
#: process that holds the whole corpus in memory and deduplicates it with pyarrow's group-by.
PLAIN_DEDUP = r"""
import os, sys
import pyarrow as pa, pyarrow.compute as pc, pyarrow.json as pj, pyarrow.parquet as pq
src, out = sys.argv[1], sys.argv[2]
files = sorted(os.path.join(d, f) for d, _, names in os.walk(src) for f in names if f.endswith(".jsonl"))
table = pa.concat_tables([pj.read_json(f) for f in files])
norm = pc.replace_substring_regex(pc.utf8_trim_whitespace(table["text"]), r"\s+", " ")
index = pa.array(range(table.num_rows))
first = pa.table({"norm": norm, "i": index}).group_by("norm").aggregate([("i", "min")])["i_min"]
os.makedirs(out, exist_ok=True)
pq.write_table(table.filter(pc.is_in(index, first)), os.path.join(out, "dedup.parquet"))
"""


@dataclass
class WorkflowRuns:
    """Row 10's and 13's measurements: the workflow and the plain baseline, interleaved; per phase its
    wall times and peak RSS, and the files the last run wrote in each phase's directory."""

    flow: list[float] = field(default_factory=list)
    plain: list[float] = field(default_factory=list)
    wall: dict[str, list[float]] = field(default_factory=dict)
    rss: dict[str, list[float]] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)


def measure_workflow(
    b: Bench, row: str, docs: int, flow_args: list[str], phases: dict[str, str], plain_code: str, source: Path
) -> WorkflowRuns:
    """Run examples/dedup.py ``flow_args`` one process per phase (as array tasks do, workers=1) and the plain
    script ``plain_code SOURCE OUT``, interleaved ``b.repeat`` times; ``phases`` maps each phase, in order, to
    the directory (relative to the output) whose Parquet files it writes."""
    runs = WorkflowRuns(wall={p: [] for p in phases}, rss={p: [] for p in phases})
    for rep in range(b.repeat):
        for side in rotated(["flow", "plain"], rep):
            progress(f"row {row}: {side}, repeat {rep + 1}/{b.repeat}")
            with fresh_dir(b.out(f"{row}-{side}")) as out:
                if side == "plain":
                    runs.plain.append(docs / run_child([sys.executable, "-c", plain_code, str(source), str(out)],
                                                       clean_env()).wall)  # fmt: skip
                    continue
                total = 0.0
                for phase in phases:
                    cmd = [sys.executable, str(DEDUP_EXAMPLE), *flow_args, "--output", str(out), "--workers", "1"]
                    child = run_child(cmd, clean_env({"CURATOR_PHASE": phase}))
                    total += child.wall
                    runs.rss[phase].append(child.maxrss)
                    runs.wall[phase].append(child.wall)
                runs.flow.append(docs / total)
                runs.files = {p: len(list((out / d).glob("*.parquet"))) for p, d in phases.items()}
    return runs


def bench_exact_dedup(b: Bench) -> list[Row]:
    """Row 10: the exact-dedup workflow (examples/dedup.py: hash, find, write; one process per phase as an
    array task would run it, workers=1) against a plain in-memory pyarrow group-by dedup, docs/s; and each
    phase's files written and peak RSS."""
    corpus = b.corpus("base")
    docs = len(corpus.files) * b.docs_per_file
    b.warm_children()
    phases = {"hash": ".curator-work/shuffle/hash", "find": ".curator-work/duplicates", "write": "."}
    runs = measure_workflow(b, "10", docs, ["--input", str(corpus.path)], phases, PLAIN_DEDUP, corpus.path)
    rows = [
        Row("10a", f"exact dedup, 3 phases, workers=1 / plain pyarrow group-by dedup in memory ({docs:,} docs)",
            Measure("workflow", "docs/s", runs.flow), Measure("plain", "docs/s", runs.plain), ">=", 0.5,
            note="the workflow writes and reads its shuffle through the filesystem; the plain loop holds the "
                 "corpus in memory and cannot be sharded"),
    ]  # fmt: skip
    for key, phase in zip("bcd", phases, strict=True):
        written = runs.files.get(phase, 0)
        rows.append(
            Row(f"10{key}", f"exact dedup phase {phase!r}: peak RSS / base corpus size; {written} files "
                f"written, {statistics.median(runs.wall[phase]):.2f} s",
                Measure(phase, "B", runs.rss[phase]), Measure("corpus", "B", [float(corpus.bytes)]), "report", 0.0)
        )  # fmt: skip
    return rows


#: Row 13's baseline: read every JSONL file and write it as Parquet, the least any dedup must do.
PLAIN_COPY = r"""
import os, sys
import pyarrow.json as pj, pyarrow.parquet as pq
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for d, _, names in os.walk(src):
    for name in sorted(names):
        if name.endswith(".jsonl"):
            pq.write_table(pj.read_json(os.path.join(d, name)), os.path.join(out, name[:-6] + ".parquet"))
"""


def near_duplicate_jsonl(b: Bench) -> tuple[Path, int]:
    """A planted near-duplicate corpus (curator_slurm.dedup.synthetic) as JSONL files of 1,000 documents,
    generated once (its marker holds the document count)."""
    from curator_slurm.dedup.synthetic import near_duplicate_corpus

    unrelated, originals = (600, 150) if b.quick else (36_000, 6_000)
    root = b.root / "corpora" / f"near-dup-u{unrelated}-o{originals}-g{GENERATOR}"
    marker = root / MARKER
    if not marker.exists():
        progress(f"row 13: generating a near-duplicate corpus ({unrelated:,} unrelated, {originals:,} originals)")
        texts = near_duplicate_corpus(unrelated=unrelated, originals=originals, seed=1).texts
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        for start in range(0, len(texts), 1000):
            part = range(start, min(start + 1000, len(texts)))
            lines = "\n".join(json.dumps({"id": i, "text": texts[i]}) for i in part)
            (root / f"part-{start // 1000:04d}.jsonl").write_text(lines + "\n")
        marker.write_text(str(len(texts)))
    return root, int(marker.read_text())


def bench_fuzzy_workflow(b: Bench) -> list[Row]:
    """Row 13: the fuzzy-dedup workflow (examples/dedup.py --fuzzy, one process per phase, workers=1) against
    a plain pyarrow loop that reads the same JSONL and writes Parquet, docs/s; and each phase's wall time,
    files written and peak RSS."""
    root, docs = near_duplicate_jsonl(b)
    b.warm_children()
    phases = {"signatures": ".curator-work/shuffle/bands", "candidates": ".curator-work/edges",
              "components": ".curator-work/duplicates", "write": "."}  # fmt: skip
    runs = measure_workflow(b, "13", docs, ["--fuzzy", "--input", str(root)], phases, PLAIN_COPY, root)
    rows = [
        Row("13a", f"fuzzy dedup, 4 phases, workers=1 / plain pyarrow JSONL-to-Parquet copy ({docs:,} docs, "
            "planted near-duplicates)",
            Measure("workflow", "docs/s", runs.flow), Measure("plain copy", "docs/s", runs.plain), ">=", 0.2),
    ]  # fmt: skip
    for key, phase in zip("bcde", phases, strict=True):
        written, speed = runs.files.get(phase, 0), [docs / w for w in runs.wall[phase]]
        rows.append(
            Row(f"13{key}", f"fuzzy dedup phase {phase!r}: docs/s of the phase alone; {written} files "
                f"written, peak RSS {statistics.median(runs.rss[phase]) / 2**20:.0f} MiB",
                Measure(phase, "docs/s", speed), Measure("plain copy", "docs/s", runs.plain), "report", 0.0)
        )  # fmt: skip
    return rows


#: Row "h": each heuristic filter, and the words of the vocabulary its web-like documents are made of.
_WEB_WORDS = [
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", "you", "were", "her",
    "she", "there", "one", "all", "we", "their", "can", "has", "been", "if", "more", "when", "will", "would", "who",
    "so", "no", "data", "system", "people", "time", "year", "way", "day", "man", "thing", "woman", "life", "child",
    "world", "school", "state", "family", "student", "group", "country", "problem", "hand", "part", "place", "case",
    "week", "company", "number", "point", "government", "night", "water", "room",
]  # fmt: skip
#: Why a filter's column API cannot be 5x its per-document Python, where that is so (the row's note).
_FILTER_LIMITS = {
    "UrlsFilter": "per document it is one C regex search that finds nothing in most texts; the column runs "
    "the same regex (RE2) on the texts containing '://'",
    "PornographicUrlsFilter": "per document one C regex search; the column checks for 'porn' first",
    "SubstringFilter": "per document one C call (str.__contains__)",
    "WordCountFilter": "per document str.split() is one C call",
    "RepeatedLinesFilter": "per document split and set are C calls on few lines",
    "RepeatedParagraphsFilter": "per document split and set are C calls on few paragraphs",
    "RepeatedLinesByCharFilter": "per document split and set are C calls on few lines",
    "RepeatedParagraphsByCharFilter": "per document split and set are C calls on few paragraphs",
    "BulletsFilter": "per document a split and a few startswith calls per line",
    "PunctuationFilter": "per document a split and one endswith call per line",
    "EllipsisFilter": "per document a split and one endswith call per line",
    "RepeatingTopNGramsFilter": "n-gram identity needs hashing every n-gram of the column, and the top "
    "n-gram's occurrences are counted with str.count per document",
    "RepeatingDuplicateNGramsFilter": "n-gram identity needs hashing every n-gram of the column",
    "SymbolsToWordsFilter": "word boundaries take several passes over the bytes (whitespace, word starts and "
    "ends, lengths in characters) and an ellipsis-word comparison; per document str.split is one C call",
    "LongWordFilter": "word boundaries and lengths in characters take several passes over the bytes; per "
    "document str.split and len are C calls",
    "WordsWithoutAlphabetsFilter": "word boundaries take several passes over the bytes",
    "CommonEnglishWordsFilter": "per document the count stops at the cutoff, usually within the first words; "
    "the column looks at every word",
    "BoilerPlateStringFilter": "the texts that mention privacy, cookies or terms of use are lower-cased and "
    "split into paragraphs; per document lower() and 'in' are C calls",
    "MeanWordLengthFilter": "per document str.split is one C call",
}


def web_like_texts(count: int, seed: int = 0) -> list[str]:
    """Deterministic English web-like documents: paragraphs of sentences, navigation menus at the top
    and bottom, bullet lists, links, cookie notices, numbers, curly quotes and brackets."""
    rng = random.Random(seed)

    def sentence() -> str:
        words = [rng.choice(_WEB_WORDS) for _ in range(rng.randint(5, 22))]
        if rng.random() < 0.1:
            words.insert(rng.randrange(len(words)), str(rng.randint(1, 2030)))
        if rng.random() < 0.05:
            words.insert(rng.randrange(len(words)), "\u201cquoted\u201d")
        if rng.random() < 0.05:
            words.insert(rng.randrange(len(words)), "(see below)")
        text = " ".join(words)
        return text[0].upper() + text[1:] + rng.choice([".", ".", ".", "?", "!", "...", ":", ""])

    texts = []
    for _ in range(count):
        parts = ["Home | News | Sport | Contact"] if rng.random() < 0.3 else []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.1:
                parts.append("\n".join(f"\u2022 {sentence()}" for _ in range(rng.randint(2, 5))))
            elif r < 0.15:
                parts.append(f"Read more at https://www.example.com/{rng.randint(1, 9999)}/{rng.choice(_WEB_WORDS)}")
            elif r < 0.18:
                parts.append("This website uses cookies. See our privacy policy and terms of use.")
            else:
                parts.append(" ".join(sentence() for _ in range(rng.randint(1, 6))))
        if rng.random() < 0.3:
            parts.append("Home | News | Sport | Contact")
        texts.append("\n\n".join(parts))
    return texts


def bench_filters(b: Bench) -> list[Row]:
    """Rows h1-h24: MB/s of each heuristic filter's column API (score_array + keep_array, as ScoreFilter
    runs it) against the same filter as a plain Python function per document (score_document +
    keep_document over Python strings, NeMo Curator's style), on one core, on web-like English text.

    The value compares the fastest sample of each side, as row 5 does: a sample takes a fraction of a
    second, and on a shared machine noise only ever adds time."""
    from curator_slurm.stages import filters as filter_module

    texts = web_like_texts(1000 if b.quick else 20000)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    column = pa.chunked_array([pa.array(texts, pa.string())])
    names = (*filter_module.NEMO_HEURISTIC_FILTERS, "SymbolRatioFilter")
    rows = []
    for i, name in enumerate(names, start=1):
        cls = getattr(filter_module, name)
        f = cls("the", "any") if name == "SubstringFilter" else cls()
        vectorised: list[float] = []
        python: list[float] = []

        def time_column(f: Any = f, out: list[float] = vectorised) -> None:
            start = time.perf_counter()
            f.keep_array(f.score_array(column))
            out.append(mb / (time.perf_counter() - start))

        def time_python(f: Any = f, out: list[float] = python) -> None:
            start = time.perf_counter()
            _ = [f.keep_document(f.score_document(t)) for t in texts]
            out.append(mb / (time.perf_counter() - start))

        time_column()  # untimed warm-up: first calls build regexes and tables
        vectorised.clear()
        for rep in range(b.micro_repeat):  # short samples: more of them, alternating order
            for measure in rotated([time_column, time_python], rep):
                measure()
        if f.keep_array(f.score_array(column)).to_pylist() != [f.keep_document(f.score_document(t)) for t in texts]:
            raise BenchError(f"{name}: the column API and the per-document API keep different documents")
        progress(f"row h{i}: {name} {statistics.median(vectorised):.0f} vs {statistics.median(python):.0f} MB/s")
        row = Row(
            f"h{i}",
            f"{name}: column API / per-document Python, MB/s on one core ({mb:.0f} MB of web-like text)",
            Measure("column", "MB/s", vectorised),
            Measure("per document", "MB/s", python),
            ">=",
            5.0,
            value=max(vectorised) / max(python),
        )
        fastest = f"value from the fastest of {len(python)} samples of each side (medians in the table)"
        row.note = fastest if row.passed else f"{fastest}; {_FILTER_LIMITS.get(name, 'no reason recorded')}"
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Group:
    keys: tuple[str, ...]
    run: Callable[[Bench], list[Row]]


#: Every row, in table order. A new row is a new Group (or a new Row from an existing one).
GROUPS: list[Group] = [
    Group(("1", "2"), bench_executor),
    Group(("3a", "3b"), bench_sharded_cpu),
    Group(("4",), bench_empty_shard),
    Group(("14",), bench_manifest_startup),
    Group(("5",), bench_select),
    Group(("6a", "6b", "6c", "6d"), bench_balance),
    Group(("7",), bench_rss),
    Group(("8a", "8b"), bench_ledger),
    Group(("9a", "9b", "9c"), bench_ray),
    Group(("12",), bench_fuzzy_signatures),
    Group(("10a", "10b", "10c", "10d"), bench_exact_dedup),
    Group(("13a", "13b", "13c", "13d", "13e"), bench_fuzzy_workflow),
    Group(tuple(f"h{i}" for i in range(1, 25)), bench_filters),
]
ROW_KEYS: tuple[str, ...] = tuple(k for g in GROUPS for k in g.keys)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=120.0, help="base corpus size (default 120)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    parser.add_argument("--quick", action="store_true", help="tiny corpora, 1 repeat: a smoke test, not a record")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--rows", metavar="KEYS", help=f"comma-separated subset of rows ({','.join(ROW_KEYS)})")
    args = parser.parse_args(argv)
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
    print(
        f"machine: nproc {info['nproc']} ({info['cpu']}), Python {info['python']}, pyarrow {info['pyarrow']}, "
        f"xxhash {info['xxhash']}, {info['platform']}; load average {load_before:.2f} before the run; "
        f"{total:.0f} s in total"
    )
    if load_before > 0.5:
        print("warning: the machine was busy before the run started; timings may be inflated")
    targeted = [r for r in rows if r.op != "report"]
    missed = [r.key for r in targeted if not r.passed]
    print(
        f"{len(targeted) - len(missed)} of {len(targeted)} targets met"
        + (f"; missed: {', '.join(missed)}" if missed else "")
    )
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


if __name__ == "__main__":
    sys.exit(main())

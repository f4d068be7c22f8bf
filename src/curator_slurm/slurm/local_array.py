"""`curator-slurm local`: a script run as N shard processes on this machine, each with the environment an
array task would have, so a sharded run can be tried (and its outputs compared) without a cluster. A
workflow runs phase after phase, each as its own local array.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from curator_slurm.errors import OptionError
from curator_slurm.runs.inputs import check_plan_inputs
from curator_slurm.runs.liveness import marked, refuse_if_live
from curator_slurm.runs.manifest import new_manifest_dir, write_manifest
from curator_slurm.runs.plan import run_plan
from curator_slurm.settings import job_environment
from curator_slurm.slurm.phases import (
    parse_phase_resources,
    parse_phase_shards,
    phase_shard_counts,
    with_phase_resources,
)


def run_local(
    script: str,
    script_args: Sequence[str],
    shards: int,
    logs: str | None = None,
    parallel: int | None = None,
    strategy: str | None = None,
    phase_shards: str | None = None,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    busy: Callable[[dict[str, Any]], None] | None = None,
    steal: bool = True,
    phase_throttle: Sequence[str] | None = None,
) -> list[int]:
    """Plan ``script`` once and run it as ``shards`` local processes (a workflow: each phase in order with
    its own shard count, ``phase_shards`` as ``--phase-shards`` takes it), logs in ``logs`` (default: a new
    temporary directory). Returns the
    shards that failed, of the last array run (a phase starts only when every shard of the one before
    ended well). Progress goes to ``out`` (default stdout), the failed shards to ``err`` (default stderr).
    Refused while a process works in the run (``runs.liveness``), and when ``busy(plan)`` raises (the CLI
    passes a check of the run's Slurm array tasks). ``steal=False`` (``--no-steal``): every shard does its own
    source tasks only (``CURATOR_STEAL=0``). A workflow's phase runs at most its throttle of processes at once:
    ``phase_throttle`` (``--phase-throttle`` texts), else what the workflow declares for it."""
    if not os.path.isfile(script):
        raise OptionError(f"{script}: no such pipeline script")
    logs = logs or tempfile.mkdtemp(prefix="curator-local-")
    os.makedirs(logs, exist_ok=True)
    plan = run_plan(script, script_args)
    for step in plan["plans"]:
        check_plan_inputs(step)  # a file changed under done work: refused, as submit refuses it
        refuse_if_live(_run_dirs(step), "`curator-slurm local`")
        if busy is not None:
            busy(step)
    out, err = out or sys.stdout, err or sys.stderr
    run = LocalArray(script, script_args, logs, parallel, strategy, out, err, steal, phase_throttle)
    if not plan.get("run_dir"):
        return _run_steps(plan, run, shards, strategy, phase_shards, out)
    with marked(plan["run_dir"], f"curator-slurm local {script}"):  # between shards and phases too
        return _run_steps(plan, run, shards, strategy, phase_shards, out)


def last_line(path: str) -> str:
    """The last line a shard's process wrote (its log's): an uncaught CuratorError's message, or a
    traceback's last line, which says what ended it."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            lines = f.read().decode("utf-8", "backslashreplace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def _run_dirs(plan: dict[str, Any]) -> list[str]:
    """The run directories of one step: a pipeline's, or a workflow's and its phases'."""
    return [d for d in [plan.get("run_dir"), *(p.get("run_dir") for p in plan.get("phases", []))] if d]


def _run_steps(
    plan: dict[str, Any], run: LocalArray, shards: int, strategy: str | None, phase_shards: str | None, out: IO[str]
) -> list[int]:
    """Every step of the script (:mod:`curator_slurm.runs.steps`) as its own local array(s), in order, each
    task with ``CURATOR_PIPELINE`` naming its step; then, when the script has glue, the script once as a
    plain process (it finds every step done and runs the glue)."""
    steps = plan["plans"]
    if len(steps) == 1 and not plan.get("glue"):
        return _run_plan(steps[0], run, shards, strategy, phase_shards, out)
    for k, step in enumerate(steps):
        print(f"step {k} of {len(steps)}: {step.get('kind')} {step.get('pipeline')!r}", file=out)
        failed = _run_plan(step, run, shards, strategy, phase_shards, out, {"CURATOR_PIPELINE": str(k)}, f"step{k}-")
        if failed:
            return failed
    if plan.get("glue"):
        print("the script once more, as the driver: its steps are done, its glue (is_driver()) runs", file=out)
        failed = run(1, {}, "driver", driver=True)
        _raise_if_stopped(run)
        return failed
    return []


def _run_plan(
    plan: dict[str, Any],
    run: LocalArray,
    shards: int,
    strategy: str | None,
    phase_shards: str | None,
    out: IO[str],
    step: dict[str, str] | None = None,
    prefix: str = "",
) -> list[int]:
    """The local array(s) of one step ``plan``: one, or one per phase of a workflow; ``step`` in their
    environment, ``prefix`` before their logs' names."""
    step = step or {}
    if plan.get("kind") != "workflow":
        extra = _local_manifest(plan["sources_table"], plan.get("run_dir"), shards, strategy)
        failed = run(shards, {**step, **extra}, f"{prefix}shard")
        _raise_if_stopped(run)
        return failed
    names = [p["phase"] for p in plan["phases"]]
    counts = phase_shard_counts(plan, shards, parse_phase_shards(phase_shards, names))
    own = with_phase_resources(plan, parse_phase_resources({"throttle": run.phase_throttle}, names))["phases"]
    run_dirs = {p["phase"]: p.get("run_dir") for p in plan["phases"]}
    throttles = {p["phase"]: p["resources"].get("throttle") for p in own}
    for phase, n in counts.items():
        print(f"phase {phase}:", file=out)
        extra = _local_manifest(plan["phase_sources"].get(phase), run_dirs[phase], n, strategy)
        failed = run(n, {**step, "CURATOR_PHASE": phase, **extra}, f"{prefix}{phase}-shard", limit=throttles[phase])
        _raise_if_stopped(run)
        if failed:
            return failed
    return []


def _raise_if_stopped(run: LocalArray) -> None:
    """A stop signal ends `local` (no later phase starts): :class:`LocalStopped` names it."""
    if run.stopped_by is not None:
        raise LocalStopped(run.stopped_by)


class LocalStopped(Exception):
    """`curator-slurm local` was stopped by a signal (its name is the argument) after its shards ended."""

    @property
    def exit_code(self) -> int:
        """What a shell reports for a process that the signal ended: 128 + its number."""
        return 128 + int(signal.Signals[self.args[0]])


def _local_manifest(table: Any, run_dir: str | None, shards: int, strategy: str | None) -> dict[str, str]:
    """``CURATOR_MANIFEST`` for the shards of a local array: the listing planned once, as `submit` does
    (into ``<run dir>/manifest/local-<n>``); nothing when the tasks cannot go into a manifest or there is no
    run directory."""
    if table is None or not run_dir:
        return {}
    directory = new_manifest_dir(run_dir, "local")
    write_manifest(directory, table, shards, strategy or "balanced")
    return {"CURATOR_MANIFEST": directory}


class LocalArray:
    """Runs arrays of shard processes of one script, at most ``parallel`` at once (default: one per CPU).

    Args:
        script: the pipeline script every shard process runs.
        script_args: the script's own arguments.
        logs: the directory of the shards' logs, ``<name>-<i>.log``.
        parallel: shard processes running at once (None: one per CPU, at most the array's size).
        strategy: ``CURATOR_SHARD_STRATEGY`` for every shard (None: the default).
        out: where progress lines go.
        err: where failures are reported.
        steal: whether shards take over each other's unstarted work (False sets ``CURATOR_STEAL=0``).
        phase_throttle: ``--phase-throttle`` texts: at most so many processes at once in the phases named.
    """

    def __init__(
        self,
        script: str,
        script_args: Sequence[str],
        logs: str,
        parallel: int | None,
        strategy: str | None,
        out: IO[str],
        err: IO[str],
        steal: bool = True,
        phase_throttle: Sequence[str] | None = None,
    ) -> None:
        self.script, self.script_args, self.logs, self.steal = script, list(script_args), logs, steal
        self.parallel, self.strategy, self.out, self.err = parallel, strategy, out, err
        self.job = f"local{os.getpid()}"
        #: The name of the signal that stopped the last array (SIGTERM, SIGINT), or None.
        self.stopped_by: str | None = None
        self.phase_throttle = phase_throttle

    def __call__(
        self, n: int, extra: dict[str, str], name: str, driver: bool = False, limit: int | None = None
    ) -> list[int]:
        """Run ``n`` shard processes with ``extra`` in their environment, logs in ``<logs>/<name>-<i>.log``;
        the shards that failed (or were stopped, or never started because a stop signal came first). With
        ``driver``, one plain process of the script (no shard, no step: it runs the script's glue).

        SIGTERM and SIGINT (Ctrl-C) are forwarded to the running shards, which finish their in-flight work
        as an array task would; no new shard starts, and this waits for every one to end, so none outlives
        it. The shards run in their own sessions, so Ctrl-C at a terminal reaches them once, through here.
        ``limit``: at most that many at once (a phase's throttle)."""
        parallel = min(self.parallel or min(n, os.cpu_count() or 1), limit or n)
        running: dict[int, tuple[subprocess.Popen[bytes], IO[bytes]]] = {}
        codes: dict[int, int] = {}
        todo = list(range(n))[::-1]
        print(f"running {n} shards of {self.script}, {parallel} at a time; logs in {self.logs}", file=self.out)
        with _forwarded_signals(lambda: [p for p, _ in running.values()]) as received:
            while todo or running:
                while todo and len(running) < parallel and not received:
                    i = todo.pop()
                    log: IO[bytes] = open(os.path.join(self.logs, f"{name}-{i}.log"), "wb")  # noqa: SIM115 - closed when it ends
                    proc = subprocess.Popen(
                        [sys.executable, self.script, *self.script_args],
                        env=job_environment() if driver else self.environment(i, n, extra),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                    running[i] = (proc, log)
                for i, (proc, log) in list(running.items()):
                    if proc.poll() is not None:
                        log.close()
                        codes[i] = proc.returncode
                        del running[i]
                        ok = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode}): {last_line(log.name)}"
                        print(f"shard {i}/{n}: {ok}", file=self.out)
                if received and not running:
                    break
                time.sleep(0.05)
        if received:
            self.stopped_by = signal.Signals(received[0]).name
            print(
                f"stopped by {self.stopped_by}: {sum(1 for c in codes.values() if c == 0)} of {n} shards finished, "
                f"{sum(1 for c in codes.values() if c != 0)} stopped or failed, {len(todo)} never started; the same "
                "command resumes the run (done work is skipped)",
                file=self.err,
            )
            return sorted({*(i for i, c in codes.items() if c != 0), *todo})
        failed = sorted(i for i, c in codes.items() if c != 0)
        if failed:
            print(
                f"{len(failed)} of {n} shards failed: {', '.join(map(str, failed))}; see {self.logs}/{name}-<i>.log",
                file=self.err,
            )
        else:
            print(f"all {n} shards finished", file=self.out)
        return failed

    def environment(self, index: int, n: int, extra: dict[str, str]) -> dict[str, str]:
        """What array task ``index`` of ``n`` would find in its environment, plus ``extra``."""
        env = job_environment(
            extra={
                "SLURM_ARRAY_JOB_ID": self.job,
                "SLURM_ARRAY_TASK_ID": str(index),
                "SLURM_ARRAY_TASK_COUNT": str(n),
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": str(n - 1),
                "SLURM_ARRAY_TASK_STEP": "1",
                **extra,
            }
        )
        if self.strategy:
            env["CURATOR_SHARD_STRATEGY"] = self.strategy
        if not self.steal:
            env["CURATOR_STEAL"] = "0"
        return env


@contextmanager
def _forwarded_signals(children: Callable[[], list[subprocess.Popen[bytes]]]) -> Iterator[list[int]]:
    """While in the body, SIGTERM and SIGINT are passed on to ``children()`` and noted in the list yielded
    (the body stops starting shards and waits for the running ones); the old handlers come back after."""
    received: list[int] = []

    def forward(signum: int, frame: object) -> None:
        received.append(signum)
        for proc in children():
            if proc.poll() is None:
                proc.send_signal(signum)

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in saved:
        signal.signal(sig, forward)
    try:
        yield received
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)

"""`curator-slurm local`: a script run as N shard processes on this machine, each with the environment an
array task would have, so a sharded run can be tried (and its outputs compared) without a cluster. A
workflow runs phase after phase, each as its own local array.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import IO, Any

from curator_slurm.errors import OptionError
from curator_slurm.runs.manifest import new_manifest_dir, write_manifest
from curator_slurm.runs.plan import run_plan
from curator_slurm.settings import job_environment
from curator_slurm.slurm.phases import parse_phase_shards, phase_shard_counts


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
) -> list[int]:
    """Plan ``script`` once and run it as ``shards`` local processes (a workflow: each phase in order with
    its own shard count, ``phase_shards`` as ``--phase-shards`` takes it), logs in ``logs`` (default: a new
    temporary directory). Returns the
    shards that failed, of the last array run (a phase starts only when every shard of the one before
    ended well). Progress goes to ``out`` (default stdout), the failed shards to ``err`` (default stderr)."""
    if not os.path.isfile(script):
        raise OptionError(f"{script}: no such pipeline script")
    logs = logs or tempfile.mkdtemp(prefix="curator-local-")
    os.makedirs(logs, exist_ok=True)
    plan = run_plan(script, script_args)
    out, err = out or sys.stdout, err or sys.stderr
    run = LocalArray(script, script_args, logs, parallel, strategy, out, err)
    if plan.get("kind") != "workflow":
        return run(shards, _local_manifest(plan["sources_table"], plan.get("run_dir"), shards, strategy), "shard")
    counts = phase_shard_counts(plan, shards, parse_phase_shards(phase_shards, [p["phase"] for p in plan["phases"]]))
    run_dirs = {p["phase"]: p.get("run_dir") for p in plan["phases"]}
    for phase, n in counts.items():
        print(f"phase {phase}:", file=out)
        extra = _local_manifest(plan["phase_sources"].get(phase), run_dirs[phase], n, strategy)
        failed = run(n, {"CURATOR_PHASE": phase, **extra}, f"{phase}-shard")
        if failed:
            return failed
    return []


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
    """Runs arrays of shard processes of one script, at most ``parallel`` at once (default: one per CPU)."""

    def __init__(
        self,
        script: str,
        script_args: Sequence[str],
        logs: str,
        parallel: int | None,
        strategy: str | None,
        out: IO[str],
        err: IO[str],
    ) -> None:
        self.script, self.script_args, self.logs = script, list(script_args), logs
        self.parallel, self.strategy, self.out, self.err = parallel, strategy, out, err
        self.job = f"local{os.getpid()}"

    def __call__(self, n: int, extra: dict[str, str], name: str) -> list[int]:
        """Run ``n`` shard processes with ``extra`` in their environment, logs in ``<logs>/<name>-<i>.log``;
        the shards that failed."""
        parallel = self.parallel or min(n, os.cpu_count() or 1)
        running: dict[int, tuple[subprocess.Popen[bytes], IO[bytes]]] = {}
        codes: dict[int, int] = {}
        todo = list(range(n))[::-1]
        print(f"running {n} shards of {self.script}, {parallel} at a time; logs in {self.logs}", file=self.out)
        while todo or running:
            while todo and len(running) < parallel:
                i = todo.pop()
                log = open(os.path.join(self.logs, f"{name}-{i}.log"), "wb")  # noqa: SIM115 - closed when it ends
                proc = subprocess.Popen(
                    [sys.executable, self.script, *self.script_args],
                    env=self.environment(i, n, extra),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
                running[i] = (proc, log)
            for i, (proc, log) in list(running.items()):
                if proc.poll() is not None:
                    log.close()
                    codes[i] = proc.returncode
                    del running[i]
                    ok = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
                    print(f"shard {i}/{n}: {ok}", file=self.out)
            time.sleep(0.05)
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
        return env

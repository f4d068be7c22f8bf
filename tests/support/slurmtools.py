"""Small helpers for tests that use the real single-node Slurm cluster.

The cluster is started with ``scripts/slurm-up.sh`` (stopped with
``scripts/slurm-down.sh``). Everything here shells out to the Slurm client
tools (``sinfo``, ``sbatch``, ``squeue``, ``scontrol``) and uses only the
standard library.

Finished jobs stay visible to ``squeue -t all`` / ``scontrol show job`` for
``MinJobAge`` seconds (3600 with slurm-up.sh), which :func:`wait_for_job`
relies on.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

__all__ = [
    "FINAL_STATES",
    "SlurmError",
    "cluster_available",
    "max_array_size",
    "sbatch",
    "show_job",
    "wait_for_job",
]

#: Job states after which a job (or array task) never changes again on its own.
FINAL_STATES: frozenset[str] = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)

#: Node states (as printed by ``sinfo -o %T``) in which the node accepts work.
_USABLE_NODE_STATES = frozenset({"idle", "mixed", "allocated", "completing"})

_CMD_TIMEOUT = 30.0


class SlurmError(RuntimeError):
    """A Slurm client command failed (non-zero exit, or unusable output)."""

    def __init__(self, cmd: list[str], returncode: int | None, stdout: str = "", stderr: str = "") -> None:
        self.cmd = cmd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        detail = (stderr or stdout).strip()
        super().__init__(f"{' '.join(cmd)!s} failed (exit {returncode}): {detail}")


def _run(
    cmd: list[str],
    *,
    input: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = _CMD_TIMEOUT,
) -> str:
    """Run ``cmd`` and return its stdout; raise :class:`SlurmError` on failure."""
    try:
        proc = subprocess.run(
            cmd,
            input=input,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise SlurmError(cmd, None, stderr=f"{cmd[0]} not found: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise SlurmError(cmd, None, stderr=f"timed out after {timeout}s") from exc
    if proc.returncode != 0:
        raise SlurmError(cmd, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


def cluster_available(min_nodes: int = 1) -> tuple[bool, str]:
    """Tell whether a Slurm cluster answers and has ``min_nodes`` nodes that accept work.

    Returns ``(True, description)`` if ``sinfo`` answers and at least ``min_nodes``
    nodes are idle, mixed or allocated (and responding), else ``(False, reason)``,
    suitable for ``pytest.skip(reason)``.
    """
    try:
        out = _run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=15)
    except SlurmError as exc:
        return False, f"Slurm not available: {exc}"
    nodes = [line.split() for line in out.splitlines() if line.strip()]
    if not nodes:
        return False, "sinfo lists no nodes"
    # A trailing '*' (e.g. 'idle*') means the node is not responding.
    usable = [name for name, state in nodes if state in _USABLE_NODE_STATES]
    if len(set(usable)) >= min_nodes:
        return True, f"Slurm nodes usable: {', '.join(sorted(set(usable)))}"
    seen = ", ".join(f"{name}={state}" for name, state in nodes)
    return False, f"no usable Slurm node (run scripts/slurm-up.sh): {seen}"


def sbatch(
    script_path_or_text: str | os.PathLike[str],
    *args: str,
    cwd: str | os.PathLike[str] | None = None,
) -> str:
    """Submit a batch job and return its job id (e.g. ``"123"``).

    ``script_path_or_text`` is either a path to a script file or the script
    text itself; a ``str`` counts as text when it contains a newline or starts
    with ``#!``. Text without a shebang line gets ``#!/bin/bash``. ``args``
    are extra sbatch options (``"--array=0-3"``, ``"-o"``, ``"log-%a.txt"``,
    ...) placed before the script. ``cwd`` is the directory sbatch runs in,
    which is also the job's default working directory.

    Raises :class:`SlurmError` if sbatch rejects the job.
    """
    cmd = ["sbatch", "--parsable", *args]
    text: str | None = None
    if isinstance(script_path_or_text, str) and ("\n" in script_path_or_text or script_path_or_text.startswith("#!")):
        text = script_path_or_text
        if not text.startswith("#!"):
            text = "#!/bin/bash\n" + text
    else:
        cmd.append(os.fspath(Path(script_path_or_text)))
    out = _run(cmd, input=text, cwd=cwd).strip()
    # --parsable prints "jobid" or "jobid;cluster".
    job_id = out.splitlines()[-1].split(";")[0].strip() if out else ""
    if not job_id.isdigit():
        raise SlurmError(cmd, 0, out, "could not parse job id from sbatch output")
    return job_id


def _parse_scontrol_record(line: str) -> dict[str, str]:
    """Parse one ``scontrol -o`` line of ``Key=Value`` pairs into a dict."""
    record: dict[str, str] = {}
    matches = list(re.finditer(r"(?:^|\s)([A-Za-z][\w:/.]*)=", line))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        record[match.group(1)] = line[match.end() : end].strip()
    return record


def show_job(job_id: str | int) -> list[dict[str, str]]:
    """Return the ``scontrol show job -o`` records of a job (one per array record).

    A pending array remainder appears as a single record whose
    ``ArrayTaskId`` is a range such as ``"2-3"`` or ``"1-7:2%2"``.
    """
    out = _run(["scontrol", "show", "job", "-o", str(job_id)])
    return [_parse_scontrol_record(line) for line in out.splitlines() if line.strip()]


def _expand_task_spec(spec: str) -> list[str]:
    """Expand an array task spec like ``"0-3"``, ``"1-7:2"``, ``"[0,5,17]%2"``."""
    spec = spec.split("%")[0].strip().strip("[]")
    tasks: list[str] = []
    for part in filter(None, spec.split(",")):
        range_part, _, step = part.partition(":")
        first, _, last = range_part.partition("-")
        if not last:
            tasks.append(str(int(first)))
        else:
            tasks.extend(str(i) for i in range(int(first), int(last) + 1, int(step or 1)))
    return tasks


def _is_task_range(task: str) -> bool:
    return any(c in task for c in "[]-,:%")


def _states_from_squeue(job_id: str) -> dict[str, str] | None:
    """Task -> state via squeue (``-r`` expands pending array records)."""
    out = _run(["squeue", "-h", "-r", "-t", "all", "-j", job_id, "-o", "%K|%T"])
    states: dict[str, str] = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        task, _, state = line.strip().partition("|")
        task = "" if task in ("N/A", "") else task
        if _is_task_range(task):
            return None  # not expanded after all; let scontrol handle it
        states[task] = state.strip()
    return states or None


def _states_from_scontrol(job_id: str) -> dict[str, str] | None:
    """Task -> state via scontrol, expanding pending array ranges."""
    states: dict[str, str] = {}
    for rec in show_job(job_id):
        state = rec.get("JobState", "UNKNOWN")
        task = rec.get("ArrayTaskId", "")
        if task and _is_task_range(task):
            for t in _expand_task_spec(task):
                states.setdefault(t, state)
        else:
            states[task] = state
    return states or None


def _current_states(job_id: str) -> dict[str, str] | None:
    """Best-effort task -> state map; ``None`` if Slurm could not tell."""
    try:
        states = _states_from_squeue(job_id)
        if states is not None:
            return states
    except SlurmError:
        pass
    return _states_from_scontrol(job_id)


def _unfinished(states: dict[str, str]) -> list[str]:
    """Tasks that are not final yet (task "" is a plain job, so test length, not truth)."""
    return [t for t, s in states.items() if s not in FINAL_STATES or _is_task_range(t)]


def wait_for_job(job_id: str | int, timeout: float = 300, poll_interval: float = 0.5) -> dict[str, str]:
    """Wait until every task of a job reached a final state and return the states.

    Works for plain jobs and job arrays (also right after submission, when an
    array is still a single pending record like ``123_[0-3]``). Returns a map
    from array task index as a string (``"0"``, ``"5"``, ...) or ``""`` for a
    non-array job to its final state (``COMPLETED``, ``FAILED``,
    ``CANCELLED``, ``TIMEOUT``, ...).

    Raises :class:`TimeoutError` (with the last seen states) when not all
    tasks are final after ``timeout`` seconds, and :class:`SlurmError` when
    slurmctld keeps not knowing the job (e.g. purged after ``MinJobAge``).
    """
    job = str(job_id)
    deadline = time.monotonic() + timeout
    last: dict[str, str] = {}
    last_error: SlurmError | None = None
    unknown_polls = 0
    while True:
        try:
            states = _current_states(job)
            last_error = None
        except SlurmError as exc:
            states, last_error = None, exc
            # "Invalid job id" several times in a row: the job is gone for good.
            if "invalid job id" in str(exc).lower():
                unknown_polls += 1
                if unknown_polls >= 5:
                    raise
        if states:
            unknown_polls = 0
            last = states
            if not _unfinished(states):
                return dict(sorted(states.items(), key=lambda kv: _task_sort_key(kv[0])))
        if time.monotonic() >= deadline:
            detail = f"; last error: {last_error}" if last_error else ""
            raise TimeoutError(f"job {job} not finished after {timeout}s; last states: {last}{detail}")
        time.sleep(poll_interval)


def _task_sort_key(task: str) -> tuple[int, str]:
    return (int(task), "") if task.isdigit() else (-1, task)


def max_array_size() -> int:
    """Return the running slurmctld's ``MaxArraySize`` (from ``scontrol show config``)."""
    out = _run(["scontrol", "show", "config"])
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.MULTILINE)
    if not match:
        raise SlurmError(["scontrol", "show", "config"], 0, "", "no MaxArraySize in output")
    return int(match.group(1))

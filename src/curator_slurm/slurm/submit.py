"""Rendering and submitting sbatch arrays: small pure functions plus the few calls to Slurm. Design: docs/design.md,
"Slurm submission"."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

from curator_slurm.errors import CuratorError, OptionError, RunDirError
from curator_slurm.runs.layout import SUBMISSIONS_FILE
from curator_slurm.runs.readfile import JSON_BYTES, read_bytes
from curator_slurm.settings import job_environment
from curator_slurm.slurm.control import ACTIVE_STATES, ENDED_BADLY_STATES, active_jobs, job_states  # noqa: F401
from curator_slurm.slurm.options import SubmitOptions, option_fields, requeue_signal
from curator_slurm.slurm.ray_script import ray_cluster_block

#: With --requeue and no --signal: SIGUSR1 to the pipeline 120 s before the time limit (earlier for a short
#: limit, see ``requeue_signal``).
DEFAULT_REQUEUE_SIGNAL = "B:USR1@120"


class SlurmCommandError(CuratorError, RuntimeError):
    """A Slurm command (sbatch, scontrol, squeue) failed or is missing."""


@dataclass(frozen=True)
class ArrayChunk:
    """One sbatch array: indices ``0..size-1`` run shards ``offset..offset+size-1``."""

    offset: int
    size: int

    @property
    def shards(self) -> range:
        return range(self.offset, self.offset + self.size)


def format_indices(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 7, 9, 10]`` → ``"0-3,7,9-10"`` (sbatch ``--array`` syntax)."""
    values = sorted(set(indices))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)


def format_tasks(tasks: Iterable[str]) -> str:
    """Array tasks named in squeue's short form, every one of them: ``["7_0", "7_1", "7_2", "8_5", "9"]`` →
    ``"7_[0-2], 8_5, 9"`` (a refusal that counts N tasks names all N, in a line however many they are)."""
    by_job: dict[str, list[int]] = {}
    alone: list[str] = []
    for task in tasks:
        job, _, index = task.partition("_")
        if index.isdigit():
            by_job.setdefault(job, []).append(int(index))
        else:
            alone.append(task)
    parts = [f"{job}_{indices[0]}" if len(set(indices)) == 1 else f"{job}_[{format_indices(indices)}]"
             for job, indices in sorted(by_job.items(), key=lambda kv: (len(kv[0]), kv[0]))]  # fmt: skip
    return ", ".join([*parts, *sorted(set(alone))])


def split_shards(total: int, max_array_size: int, max_array_tasks: int | None = None) -> list[ArrayChunk]:
    """Cut ``total`` shards into arrays whose indices stay below ``max_array_size`` (Slurm's limit is
    on the index, so an array holds at most that many tasks) and within ``max_array_tasks``."""
    if total < 1:
        raise OptionError(f"--shards {total}: cannot split fewer than 1 shard into arrays")
    if max_array_size < 1:
        raise OptionError(f"MaxArraySize={max_array_size} (scontrol show config) leaves no valid array index")
    per_array = min(max_array_size, max_array_tasks or max_array_size)
    return [ArrayChunk(offset, min(per_array, total - offset)) for offset in range(0, total, per_array)]


def parse_array_limits(config_text: str) -> tuple[int, int | None]:
    """(MaxArraySize, max_array_tasks or None) from ``scontrol show config`` output."""
    size_match = re.search(r"^MaxArraySize\s*=\s*(\d+)", config_text, re.MULTILINE)
    tasks_match = re.search(r"max_array_tasks=(\d+)", config_text)
    max_size = int(size_match.group(1)) if size_match else 1001
    return max_size, int(tasks_match.group(1)) if tasks_match else None


def _run_slurm(cmd: Sequence[str], timeout: float = 60, env: dict[str, str] | None = None) -> str:
    if shutil.which(cmd[0]) is None:
        raise SlurmCommandError(f"{cmd[0]} not found on PATH; run this on a Slurm login node")
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise SlurmCommandError(f"{shlex.join(cmd)} failed: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


def cluster_array_limits() -> tuple[int, int | None]:
    return parse_array_limits(_run_slurm(["scontrol", "show", "config"]))


def array_limits(dry_run: bool) -> tuple[int, int | None, str]:
    """(MaxArraySize, max_array_tasks, where they came from): the cluster's; on a dry run without a
    reachable controller, Slurm's default size."""
    try:
        size, tasks = cluster_array_limits()
        return size, tasks, "from scontrol show config"
    except SlurmCommandError:
        if not dry_run:
            raise
        return 1001, None, "Slurm's default; scontrol not reachable"


def refuse_if_busy(run_dir: str, force: bool = False) -> None:
    """One submission at a time per run: refuse while an array task of an earlier one is queued or running
    (both would take the same source tasks, doing them twice)."""
    busy = active_jobs([str(a["job_id"]) for sub in load_submissions(run_dir) for a in sub["arrays"]])
    if busy and not force:
        raise OptionError(
            f"{len(busy)} task(s) of this run are still queued or running ({format_tasks(busy)}); a second "
            f"submission would do their source tasks twice. Wait (curator-slurm status {run_dir}), scancel them, "
            "or, for retry, pass --force"
        )


def _directive(name: str, value: object) -> str:
    """One ``#SBATCH`` line. sbatch splits a directive at white space unless it is in double quotes, so a
    value with a space (a job name from a script's file name, a log directory) is quoted."""
    text = str(value)
    if '"' in text or "\n" in text or "\r" in text:
        raise OptionError(f"#SBATCH --{name}: {text!r} holds a double quote or a line break, which sbatch cannot read")
    if any(c.isspace() for c in text) or "#" in text:
        text = f'"{text}"'
    return f"#SBATCH --{name}={text}"


def render_script(opts: SubmitOptions, chunk: ArrayChunk) -> str:
    """The sbatch script of one array of the submission."""
    lines = ["#!/bin/bash", _directive("job-name", opts.job_name)]
    array = f"0-{chunk.size - 1}" + (f"%{opts.throttle}" if opts.throttle else "")
    lines.append(_directive("array", array))
    lines.append(_directive("output", os.path.join(opts.logs_dir, "%A_%a.log")))
    for name, option in option_fields():
        if option.directive and getattr(opts, name) is not None:
            lines.append(_directive(option.directive, getattr(opts, name)))
    if opts.nodes_per_task > 1:
        lines.append(_directive("nodes", opts.nodes_per_task))
        lines.append(_directive("ntasks-per-node", 1))
    if opts.requeue and opts.signal is None:
        # requeueing is triggered by a warning signal (SIGTERM is also scancel's): ask for one
        lines.append(_directive("signal", requeue_signal(opts.time)[0]))
    if opts.requeue:
        lines.append("#SBATCH --requeue")
        lines.append("#SBATCH --open-mode=append")  # keep the log of every attempt, not just the last
    lines.extend(f"#SBATCH {arg}" for arg in opts.sbatch_args)
    lines += ["", "set -euo pipefail", f"cd {shlex.quote(opts.workdir)}"]
    lines.extend(opts.env_setup)
    env = {
        "CURATOR_NUM_SHARDS": str(opts.shards),
        "CURATOR_SHARD_OFFSET": str(chunk.offset),
        "CURATOR_RUN_DIR": opts.run_dir,
        **dict(opts.env),
    }
    for name, option in option_fields():
        value = getattr(opts, name)
        if option.env and value:
            env[option.env] = option.flag_env if value is True else str(value)
    lines.extend(f"export {k}={shlex.quote(v)}" for k, v in env.items())
    command = shlex.join([opts.python, opts.script, *opts.script_args])
    if opts.nodes_per_task == 1:
        # exec: the pipeline becomes the batch step, so signals (--signal=B:..., scancel -b) reach it.
        lines.append(f"exec {command}")
    else:
        lines += ray_cluster_block(opts, command)
    return "\n".join(lines) + "\n"


def sbatch_command(script_path: str) -> list[str]:
    return ["sbatch", "--parsable", script_path]


def preview(opts: SubmitOptions, chunks: Sequence[ArrayChunk], kind: str) -> list[dict[str, Any]]:
    """What a dry run shows of each array: its offset and size, its script and the sbatch command line
    (with a placeholder for the script's file, which a dry run does not write)."""
    return [
        {
            "offset": c.offset,
            "size": c.size,
            "script": render_script(opts, c),
            "command": sbatch_command(f"<{kind}-{i}.sh>"),
        }
        for i, c in enumerate(chunks)
    ]


def submission_options(
    plan: Mapping[str, Any], script: str, script_args: Sequence[str], shards: int, run_dir: str | None,
    values: Mapping[str, Any],
) -> SubmitOptions:  # fmt: skip
    """The options of submitting ``script`` as planned (``plan``, from ``run_plan``): the user's ``values``
    (field values) over a job name from the script's file name; the run directory given or the pipeline's
    (refused when it has none); with a manifest of a pipeline's tasks, ``balanced`` unless a strategy is
    given (the manifest fixes who does what, so every shard sees the same list)."""
    directory = os.path.abspath(run_dir or plan["run_dir"] or "")
    if not directory or directory == os.path.abspath(""):
        raise OptionError(
            "the pipeline does not end in a file writer, so there is no default run directory; pass --run-dir"
        )
    fields = {"job_name": os.path.splitext(os.path.basename(script))[0], **values}
    if plan.get("sources_table") is not None and plan.get("kind") != "workflow":
        fields["strategy"] = values.get("strategy") or "balanced"
    return SubmitOptions(
        script=os.path.abspath(script), script_args=tuple(script_args), shards=shards, run_dir=directory, **fields
    )


class ArrayRecord(TypedDict):
    """One sbatch array of a submission: its job id, the shards it runs (``offset`` to ``offset + size - 1``)
    and its script."""

    job_id: str
    offset: int
    size: int
    script: str


class _SubmissionCommon(TypedDict):
    """What every array of one submission records alike."""

    kind: str
    shards: int
    script: str
    script_args: list[str]
    #: The :class:`SubmitOptions` as ``dataclasses.asdict`` gives them (but ``script`` and ``script_args``).
    options: dict[str, Any]
    source_list: str | None
    submission: str


class SubmissionRecord(_SubmissionCommon):
    """A line of ``submissions.jsonl``: one array of a submission, as soon as sbatch gave its job id."""

    arrays: list[ArrayRecord]
    time: float


@dataclass(frozen=True)
class Submission:
    """What one `submit` or `retry` sent to Slurm, recorded in the run directory."""

    kind: str
    shards: int
    arrays: list[ArrayRecord]
    script: str
    script_args: list[str]
    options: dict[str, Any]
    source_list: str | None
    time: float
    #: Shared by the lines (one per array) of one submission in ``submissions.jsonl``.
    submission: str = ""


def submit(opts: SubmitOptions, chunks: list[ArrayChunk], kind: str, source_list: str | None = None) -> Submission:
    """Write each array's script into the run directory, sbatch it, and record its job id at once.

    ``submissions.jsonl`` gets one line per array as soon as sbatch returns its id (fsynced), so a
    failure on a later array never loses an earlier one's id: `status` follows it and `retry` waits for
    it. The returned record holds every array of the submission."""
    scripts_dir = os.path.join(opts.run_dir, "sbatch")
    os.makedirs(scripts_dir, exist_ok=True)
    os.makedirs(opts.logs_dir, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    arrays: list[ArrayRecord] = []
    common: _SubmissionCommon = {
        "kind": kind,
        "shards": opts.shards,
        "script": opts.script,
        "script_args": list(opts.script_args),
        "options": {k: v for k, v in asdict(opts).items() if k not in ("script", "script_args")},
        "source_list": source_list,
        "submission": f"{kind}-{stamp}-{os.getpid()}",
    }
    for i, chunk in enumerate(chunks):
        path = os.path.join(scripts_dir, f"{kind}-{stamp}-{i}.sh")
        with open(path, "w", encoding="utf-8") as f:
            f.write(render_script(opts, chunk))
        # sbatch exports the submitting environment: leave out what would tell a task the wrong shard.
        try:
            out = _run_slurm(sbatch_command(path), env=job_environment())
        except SlurmCommandError as e:
            if not arrays:
                raise
            done = ", ".join(str(a["job_id"]) for a in arrays)
            raise SlurmCommandError(
                f"{e}. The arrays submitted before it ({done}) are recorded in {opts.run_dir}: follow them with "
                f"`curator-slurm status {opts.run_dir}`; once they end, `curator-slurm retry` submits the rest"
            ) from e
        job_id = out.strip().splitlines()[-1].split(";")[0]
        array: ArrayRecord = {"job_id": job_id, "offset": chunk.offset, "size": chunk.size, "script": path}
        arrays.append(array)
        _append_line(os.path.join(opts.run_dir, SUBMISSIONS_FILE), {**common, "arrays": [array], "time": time.time()})
    return Submission(arrays=arrays, time=time.time(), **common)


def _append_line(path: str, record: SubmissionRecord) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


@contextmanager
def submission_lock(run_dir: str) -> Iterator[None]:
    """Held while one `submit` or `retry` checks the run's jobs and submits: a second one at the same time
    is refused instead of both finding nothing running and both submitting."""
    import fcntl

    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, ".submit.lock"), "a") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OptionError(
                f"another curator-slurm submit or retry is submitting into {run_dir} right now; wait for it, then "
                f"see curator-slurm status {run_dir}"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def load_submissions(run_dir: str) -> list[SubmissionRecord]:
    """The lines of the run's ``submissions.jsonl``, oldest first (JSON objects as :func:`submit` wrote them;
    an older line may lack a key)."""
    path = os.path.join(run_dir, SUBMISSIONS_FILE)
    if not os.path.exists(path):
        return []
    records: list[SubmissionRecord] = []
    # A regular file of bounded size (a FIFO in its place is refused, not waited on).
    for lineno, line in enumerate(read_bytes(path, JSON_BYTES).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
            problem = "" if isinstance(record, dict) else "not a JSON object"
        except UnicodeDecodeError:
            problem = "not UTF-8 text"
        except json.JSONDecodeError as e:
            problem = f"not valid JSON ({e.msg})"
        if problem:
            raise RunDirError(
                f"{path}:{lineno}: {problem}; each line records one submission: repair or delete that line "
                "(its jobs are then no longer followed by status and retry)"
            )
        records.append(record)
    return records

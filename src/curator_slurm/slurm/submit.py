"""Rendering and submitting sbatch arrays: small pure functions plus the few calls to Slurm.

A submission of N logical shards becomes one or more arrays whose indices stay below the cluster's
``MaxArraySize`` (and within ``max_array_tasks``); every task of every array gets
``CURATOR_NUM_SHARDS=N`` and its array's ``CURATOR_SHARD_OFFSET``, so shard = offset + array index.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from curator_slurm.errors import CuratorError, OptionError, RunDirError
from curator_slurm.slurm.control import ACTIVE_STATES, ENDED_BADLY_STATES, active_jobs, job_states  # noqa: F401
from curator_slurm.slurm.env import job_environment
from curator_slurm.slurm.ray_script import ray_cluster_block

SUBMISSIONS_FILE = "submissions.jsonl"
#: With --requeue and no --signal: SIGUSR1 to the pipeline 120 s before the time limit.
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


@dataclass(frozen=True)
class Option:
    """How a :class:`SubmitOptions` field is offered and used, declared beside the field: the command-line
    flag of ``submit`` and ``retry`` and its help, and what the value becomes in the sbatch script (a
    ``#SBATCH --<directive>=<value>`` line, or an ``export <env>=...`` for every task). The parser, the
    mapping from parsed arguments back to fields and :func:`render_script` are all derived from these."""

    help: str | None = None
    #: ``#SBATCH --<directive>=<value>`` when the value is not None (else the script renders it specially).
    directive: str | None = None
    #: Exported to every task when the value is set (``1`` for a flag).
    env: str | None = None
    #: The command-line flag when it is not ``--<field-name>`` with dashes.
    flag: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    #: An sbatch option (of ``submit`` and ``retry``); else an option of how the tasks shard (``submit`` only).
    sbatch: bool = True


def _option(default: Any = None, **option: Any) -> Any:
    return field(default=default, metadata={"option": Option(**option)})


@dataclass(frozen=True)
class SubmitOptions:
    """Everything that goes into the sbatch script(s) of one submission. The fields declared with
    :class:`Option` metadata are the user's options (see :func:`option_fields`)."""

    script: str
    script_args: tuple[str, ...] = ()
    shards: int = 1
    run_dir: str = ""
    #: ``hash`` or ``balanced``; None: the default, hash.
    strategy: str | None = _option(
        env="CURATOR_SHARD_STRATEGY", choices=("hash", "balanced"), help="shard strategy (default: hash)", sbatch=False
    )
    throttle: int | None = _option(metavar="K", help="run at most K tasks of an array at once (%%K)")
    time: str | None = _option(directive="time", help="time limit per task, e.g. 2:00:00")
    partition: str | None = _option(directive="partition")
    cpus_per_task: int | None = _option(directive="cpus-per-task")
    mem: str | None = _option(directive="mem", help="memory per node, e.g. 16G")
    gpus_per_task: int | None = _option(directive="gpus-per-task")
    nodes_per_task: int = _option(1, help="nodes per array task; > 1 starts a Ray cluster over them")
    job_name: str = _option("curator")
    output_logs: str = _option("", metavar="DIR", help="task logs go to DIR/<job>_<task>.log")
    signal: str | None = _option(
        directive="signal", help="sbatch --signal, e.g. B:USR1@300 to stop cleanly before the time limit"
    )
    requeue: bool = _option(
        False, env="CURATOR_REQUEUE", help="make tasks requeueable and requeue them after a stop signal"
    )
    #: Go on when the inputs listed differ from the run's first.
    accept_new_inputs: bool = _option(
        False,
        env="CURATOR_ACCEPT_NEW_INPUTS",
        help="let tasks go on when the inputs they list differ from the run's first listing "
        "(files added or removed since); sets CURATOR_ACCEPT_NEW_INPUTS=1",
    )
    sbatch_args: tuple[str, ...] = _option(
        (), flag="--sbatch-arg", metavar="ARG", help="extra sbatch option (repeatable)"
    )
    env_setup: tuple[str, ...] = _option(
        (), metavar="LINE", help="shell line run before the pipeline, e.g. 'source ~/venv/bin/activate' (repeatable)"
    )
    python: str = field(default_factory=lambda: sys.executable)
    #: Extra environment for every task (e.g. the frozen source list of a retry).
    env: tuple[tuple[str, str], ...] = ()
    workdir: str = field(default_factory=os.getcwd)

    def __post_init__(self) -> None:
        if self.shards < 1:
            raise OptionError(f"--shards {self.shards}: must be >= 1")
        if self.throttle is not None and self.throttle < 1:
            raise OptionError(f"--throttle {self.throttle}: must be >= 1")
        if self.nodes_per_task < 1:
            raise OptionError(f"--nodes-per-task {self.nodes_per_task}: must be >= 1")
        if self.signal is not None:
            check_signal(self.signal)

    @property
    def logs_dir(self) -> str:
        return self.output_logs or os.path.join(self.run_dir, "logs")

    @classmethod
    def from_record(cls, record: Mapping[str, Any], **changes: Any) -> SubmitOptions:
        """Options as ``dataclasses.asdict`` saved them (submissions.jsonl, a workflow's submission), with
        ``changes``; lists become tuples again, and keys that are no field (an older record's) are ignored."""
        names = {f.name for f in fields(cls)}
        values = {k: _as_tuple(v) for k, v in {**record, **changes}.items() if k in names}
        return cls(**values)

    def with_arguments(self, parsed: Mapping[str, Any], keep: Sequence[str] = ()) -> SubmitOptions:
        """These options with those the user gave (``option_values`` of the parsed arguments), except
        the fields in ``keep``."""
        return dataclasses.replace(self, **{k: v for k, v in parsed.items() if k not in keep})


def _as_tuple(value: Any) -> Any:
    """A JSON list back as the tuple a field holds (``env`` is a tuple of pairs)."""
    return tuple(_as_tuple(v) for v in value) if isinstance(value, list) else value


def option_fields(sbatch: bool | None = None) -> list[tuple[str, Option]]:
    """(field name, :class:`Option`) of every user option of :class:`SubmitOptions`, in declaration order;
    only the sbatch ones (``sbatch=True``) or only the others (``False``)."""
    out = []
    for f in fields(SubmitOptions):
        option = f.metadata.get("option")
        if option is not None and (sbatch is None or option.sbatch == sbatch):
            out.append((f.name, option))
    return out


def add_option_arguments(parser: argparse.ArgumentParser, sbatch: bool, defaults_from_run: bool = False) -> None:
    """Add the options of :func:`option_fields` (``sbatch``) to ``parser``, each with the field's name as
    its destination. With ``defaults_from_run`` (``retry``) an option not given is left out of the parsed
    arguments, so the submission's own value stays."""
    types = {f.name: str(f.type) for f in fields(SubmitOptions)}
    for name, option in option_fields(sbatch):
        flag = option.flag or "--" + name.replace("_", "-")
        kwargs: dict[str, Any] = {"dest": name, "help": option.help}
        if types[name] == "bool":
            kwargs.update(action="store_true", default=False)
        elif types[name].startswith("tuple"):
            kwargs.update(action="append", default=None, metavar=option.metavar)
        else:
            kwargs.update(type=int if types[name].startswith("int") else str, default=None, metavar=option.metavar)
            if option.choices:
                kwargs["choices"] = list(option.choices)
        if defaults_from_run:
            kwargs["default"] = argparse.SUPPRESS
        parser.add_argument(flag, **kwargs)


def option_values(parsed: argparse.Namespace | Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`SubmitOptions` fields the user set in ``parsed`` (the arguments of
    :func:`add_option_arguments`; an option not given, None, is left out), as field values."""
    values = parsed if isinstance(parsed, Mapping) else vars(parsed)
    return {name: _as_tuple(values[name]) for name, _ in option_fields() if values.get(name) is not None}


_SIGNAL = re.compile(r"^(?:(?P<where>[RB]{1,2}):)?(?P<sig>[A-Za-z0-9]+)(?:@(?P<seconds>[^@]*))?$")


def check_signal(value: str) -> None:
    """Refuse an ``--signal`` value sbatch would reject or misread: ``[{R|B}:]<signal>[@<seconds>]``, the
    signal a name (``USR1``, ``SIGUSR1``) or number, the seconds a whole number from 0 to 65535."""
    import signal

    fix = "use [B:]SIGNAL[@SECONDS], e.g. B:USR1@300 (SIGUSR1 to the batch step 300 s before the time limit)"
    match = _SIGNAL.match(value)
    if not match or (match.group("where") and len(set(match.group("where"))) != len(match.group("where"))):
        raise OptionError(f"--signal {value!r}: not a signal specification; {fix}")
    sig = match.group("sig").upper()
    known = sig.isdigit() and 0 < int(sig) < signal.NSIG
    known = known or sig in signal.Signals.__members__ or f"SIG{sig}" in signal.Signals.__members__
    if not known:
        raise OptionError(f"--signal {value!r}: {match.group('sig')!r} is not a signal name or number; {fix}")
    seconds = match.group("seconds")
    if seconds is not None and not (seconds.isdigit() and int(seconds) <= 65535):
        raise OptionError(f"--signal {value!r}: {seconds!r} is not a number of seconds from 0 to 65535; {fix}")


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
            f"{len(busy)} task(s) of this run are still queued or running ({', '.join(busy[:5])}); a second "
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
        lines.append(_directive("signal", DEFAULT_REQUEUE_SIGNAL))
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
            env[option.env] = "1" if value is True else str(value)
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


@dataclass(frozen=True)
class Submission:
    """What one `submit` or `retry` sent to Slurm, recorded in the run directory."""

    kind: str
    shards: int
    arrays: list[dict[str, object]]
    script: str
    script_args: list[str]
    options: dict[str, object]
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
    arrays: list[dict[str, object]] = []
    common = {
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
        array = {"job_id": job_id, "offset": chunk.offset, "size": chunk.size, "script": path}
        arrays.append(array)
        _append_line(os.path.join(opts.run_dir, SUBMISSIONS_FILE), {**common, "arrays": [array], "time": time.time()})
    return Submission(arrays=arrays, time=time.time(), **common)  # type: ignore[arg-type]


def _append_line(path: str, record: dict[str, object]) -> None:
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


def load_submissions(run_dir: str) -> list[dict[str, object]]:
    path = os.path.join(run_dir, SUBMISSIONS_FILE)
    if not os.path.exists(path):
        return []
    records: list[dict[str, object]] = []
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, start=1):
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

"""The options of a submission, each declared once as a field of :class:`SubmitOptions` whose :class:`Option` says
how the user gives it and what it becomes in the sbatch script; the parser and the script derive from those
fields. Design: docs/design.md, "Slurm submission"."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from curator_slurm.errors import OptionError


@dataclass(frozen=True)
class Option:
    """How a :class:`SubmitOptions` field is offered and used, declared beside the field: the command-line
    flag of ``submit`` and ``retry`` and its help, and what the value becomes in the sbatch script (a
    ``#SBATCH --<directive>=<value>`` line, or an ``export <env>=...`` for every task). The parser, the
    mapping from parsed arguments back to fields and :func:`render_script` are all derived from these."""

    help: str | None = None
    #: ``#SBATCH --<directive>=<value>`` when the value is not None (else the script renders it specially).
    directive: str | None = None
    #: Exported to every task when the value is set (``flag_env`` for a flag).
    env: str | None = None
    #: What ``env`` is set to for a flag that is given: ``1``, or ``0`` for a flag that turns something off.
    flag_env: str = "1"
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
    #: Every shard does its own source tasks only (no takeover of a straggler's unstarted work).
    no_steal: bool = _option(
        False,
        env="CURATOR_STEAL",
        flag_env="0",
        sbatch=False,
        help="a task that finished its shard takes over no unstarted work of other shards (sets CURATOR_STEAL=0)",
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
            check_signal(self.signal, self.time)
        if self.time is not None:
            time_limit_seconds(self.time)  # refuse what sbatch would refuse, before anything is written

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


def phase_option_fields() -> list[tuple[str, Option]]:
    """The options a workflow's phases may each have their own value of (``--phase-<option> PHASE=VALUE``):
    those :class:`~curator_slurm.workflows.workflow.PhaseResources` declares, in declaration order."""
    from curator_slurm.workflows.workflow import PhaseResources

    per_phase = {f.name for f in fields(PhaseResources)}
    return [(name, option) for name, option in option_fields(sbatch=True) if name in per_phase]


def phase_flag(name: str, option: Option) -> str:
    """``--phase-time`` for ``--time``, ``--phase-sbatch-arg`` for ``--sbatch-arg``."""
    return "--phase-" + (option.flag or "--" + name.replace("_", "-"))[2:]


def add_phase_arguments(parser: argparse.ArgumentParser, only: Sequence[str] | None = None) -> None:
    """Add ``--phase-<option>`` for each of :func:`phase_option_fields` (or ``only`` those; destination
    ``phase_<field>``, a list of what was given): ``PHASE=VALUE,...`` (repeatable), one ``PHASE=ARG`` for a
    repeatable option."""
    types = {f.name: str(f.type) for f in fields(SubmitOptions)}
    for name, option in phase_option_fields():
        if only is not None and name not in only:
            continue
        flag, many = phase_flag(name, option), types[name].startswith("tuple")
        plain = option.flag or "--" + name.replace("_", "-")
        text = f"{plain} for the phases named of a workflow (over the workflow's default for them)"
        if many:
            text = f"{plain} for one phase of a workflow, after the plain ones (repeatable)"
        value = option.metavar or name.split("_")[0].upper()
        metavar = f"PHASE={value}" if many else f"PHASE={value},..."
        parser.add_argument(flag, dest=f"phase_{name}", action="append", default=None, metavar=metavar, help=text)


def option_values(parsed: argparse.Namespace | Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`SubmitOptions` fields the user set in ``parsed`` (the arguments of
    :func:`add_option_arguments`; an option not given, None, is left out), as field values."""
    values = parsed if isinstance(parsed, Mapping) else vars(parsed)
    return {name: _as_tuple(values[name]) for name, _ in option_fields() if values.get(name) is not None}


_SIGNAL = re.compile(r"^(?:(?P<where>[RB]{1,2}):)?(?P<sig>[A-Za-z0-9]+)(?:@(?P<seconds>[^@]*))?$")


def check_signal(value: str, time: str | None = None) -> None:
    """Refuse an ``--signal`` value sbatch would reject or misread: ``[{R|B}:]<signal>[@<seconds>]``, the
    signal a name (``USR1``, ``SIGUSR1``) or number, the seconds a whole number from 0 to 65535; and, with a
    ``time`` limit, a warning meant to come earlier than the task starts (Slurm would send it at once)."""
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
    limit = time_limit_seconds(time) if time else None
    if seconds is not None and limit is not None and int(seconds) >= limit:
        raise OptionError(
            f"--signal {value!r} asks for the signal {seconds} s before the time limit, but --time {time} is only "
            f"{limit} s: the task would be told to stop as it starts. Give a warning shorter than the limit, e.g. "
            f"@{max(1, limit // 2)}, or a longer --time"
        )


#: With --requeue and no --signal: SIGUSR1 to the pipeline this many seconds before the time limit ...
REQUEUE_WARNING_SECONDS = 120


def requeue_signal(time: str | None) -> tuple[str, str | None]:
    """The ``--signal`` that --requeue without one asks for, and a note when the time limit made it earlier
    than the usual 120 s: a warning 120 s before a limit of 60 s would come before the task starts, so
    it is then half the limit."""
    limit = time_limit_seconds(time) if time else None
    if limit is None or limit > 2 * REQUEUE_WARNING_SECONDS:
        return f"B:USR1@{REQUEUE_WARNING_SECONDS}", None
    seconds = max(1, limit // 2)
    return f"B:USR1@{seconds}", (
        f"--requeue with --time {time} ({limit} s): the stop-and-requeue signal goes {seconds} s before the limit "
        f"(B:USR1@{seconds}), not the usual {REQUEUE_WARNING_SECONDS} s; pass --signal to choose"
    )


_TIME = re.compile(r"^(?:(?P<days>\d+)-)?(?P<rest>\d+(?::\d+){0,2})$")


def time_limit_seconds(text: str) -> int | None:
    """Slurm's ``--time`` in seconds (``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``); None for
    no limit (``UNLIMITED``, ``infinite``, ``-1``); a clear error for what sbatch would reject."""
    value = text.strip()
    if value.lower() in ("unlimited", "infinite", "-1"):
        return None
    match = _TIME.match(value)
    if not match:
        raise OptionError(
            f"--time {text!r}: not a Slurm time limit; use MINUTES, MM:SS, HH:MM:SS or DAYS-HH[:MM[:SS]], e.g. 2:00:00"
        )
    parts = [int(p) for p in match.group("rest").split(":")]
    if match.group("days") is not None:  # D-H, D-H:M, D-H:M:S
        h, m, s = [*parts, 0, 0][:3]
        return int(match.group("days")) * 86400 + h * 3600 + m * 60 + s
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return parts[0] * 3600 + parts[1] * 60 + parts[2]

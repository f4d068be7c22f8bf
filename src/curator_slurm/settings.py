"""The one module that reads the environment: the ``CURATOR_*`` settings and the job variables every run needs,
resolved once into frozen values. Design: docs/design.md, "Settings"; rules: docs/reference.md, "How a process
finds its shard"."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from curator_slurm.errors import SettingError, ShardConfigError

STRATEGIES = ("hash", "balanced")


def _int(
    env: Mapping[str, str],
    name: str,
    minimum: int | None = None,
    fix: str = "",
    error: type[SettingError] = ShardConfigError,
) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise error(f"{name}={raw!r} is not an integer. {fix}".strip()) from None
    if minimum is not None and value < minimum:
        raise error(f"{name}={raw!r} must be >= {minimum}. {fix}".strip())
    return value


def job_fields(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The fields of :class:`curator_slurm.shard.JobInfo` that Slurm's variables set (all absent outside Slurm)."""
    env = os.environ if environ is None else environ
    restart = env.get("SLURM_RESTART_COUNT", "0")
    return {
        "job_id": env.get("SLURM_JOB_ID"),
        "array_job_id": env.get("SLURM_ARRAY_JOB_ID"),
        "array_task_id": env.get("SLURM_ARRAY_TASK_ID"),
        "restart_count": int(restart) if restart.isdigit() else 0,
        "step_id": env.get("SLURM_STEP_ID"),
        "procid": env.get("SLURM_PROCID"),
    }


def shard_fields(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The fields of :class:`curator_slurm.shard.ShardSpec` but its job, resolved by the rules above; bad
    values raise :class:`ShardConfigError` naming the variable and the fix."""
    env = os.environ if environ is None else environ
    strategy = (env.get("CURATOR_SHARD_STRATEGY") or "hash").strip().lower()
    if strategy not in STRATEGIES:
        raise ShardConfigError(
            f"CURATOR_SHARD_STRATEGY={env['CURATOR_SHARD_STRATEGY']!r} is not one of {', '.join(STRATEGIES)}; "
            "unset it for the default (hash)"
        )
    sharding = (env.get("CURATOR_SHARDING") or "").strip().lower()
    if sharding in ("off", "0", "false", "no"):
        return {"strategy": strategy, "origin": "CURATOR_SHARDING=off"}
    if sharding not in ("", "on", "1", "true", "yes"):
        raise ShardConfigError(f"CURATOR_SHARDING={env['CURATOR_SHARDING']!r}: use 'off' to disable sharding")

    source_list = env.get("CURATOR_SOURCE_LIST") or None
    if source_list is not None and not os.path.isfile(source_list):
        raise ShardConfigError(f"CURATOR_SOURCE_LIST={source_list!r} is not a file; point it at a list of task ids")
    manifest = env.get("CURATOR_MANIFEST") or None
    if manifest is not None and not os.path.isdir(manifest):
        raise ShardConfigError(
            f"CURATOR_MANIFEST={manifest!r} is not a directory; point it at the manifest `curator-slurm submit` "
            "wrote (<run dir>/manifest/...), or unset it to list the inputs"
        )
    index, count, origin = _base_shard(env)
    enabled = count is not None
    if count is None:
        index, count = 0, 1
    assert index is not None
    index, count, origin, enabled = _srun_rank(env, index, count, origin, enabled)
    fields = {"index": index, "count": count, "strategy": strategy, "enabled": enabled, "origin": origin}
    return {**fields, "source_list": source_list, "manifest": manifest}


def _srun_rank(
    env: Mapping[str, str], index: int, count: int, origin: str, enabled: bool
) -> tuple[int, int, str, bool]:
    """The shard narrowed to this process's sub-shard when it is one of several tasks of an ``srun`` step."""
    step_tasks = _int(env, "SLURM_STEP_NUM_TASKS", minimum=1)
    if step_tasks is None or step_tasks <= 1:
        return index, count, origin, enabled
    procid = _int(env, "SLURM_PROCID", minimum=0, fix="It is set by srun; do not override it.")
    if procid is None:
        raise ShardConfigError(
            f"SLURM_STEP_NUM_TASKS={step_tasks} but SLURM_PROCID is unset; launch the step with srun"
        )
    if procid >= step_tasks:
        raise ShardConfigError(f"SLURM_PROCID={procid} must be below SLURM_STEP_NUM_TASKS={step_tasks}")
    rank = f"srun rank {procid} of {step_tasks}"
    return index * step_tasks + procid, count * step_tasks, f"{origin}; {rank}" if enabled else rank, True


def _base_shard(env: Mapping[str, str]) -> tuple[int | None, int | None, str]:
    """(index, count, origin) from the overrides or the array variables; count None: not sharded."""
    count = _int(env, "CURATOR_NUM_SHARDS", minimum=1, fix="Set it to the total number of shards (>= 1).")
    offset = _int(env, "CURATOR_SHARD_OFFSET", minimum=0, fix="Set it to the shard of array index 0 (>= 0).")
    index = _int(env, "CURATOR_SHARD_INDEX", minimum=0, fix="Set it to a shard number from 0.")
    array_id = _int(env, "SLURM_ARRAY_TASK_ID", minimum=0)

    if offset is not None and count is None:
        raise ShardConfigError(
            f"CURATOR_SHARD_OFFSET={offset} is set without CURATOR_NUM_SHARDS; set CURATOR_NUM_SHARDS to the "
            "total number of shards across all arrays"
        )
    if index is not None and offset is not None:
        raise ShardConfigError("CURATOR_SHARD_INDEX and CURATOR_SHARD_OFFSET are both set; unset one of them")

    if count is not None:
        if index is not None:
            origin = f"CURATOR_SHARD_INDEX={index}, CURATOR_NUM_SHARDS={count}"
        elif array_id is not None:
            index = array_id + (offset or 0)
            origin = f"SLURM_ARRAY_TASK_ID={array_id} + CURATOR_SHARD_OFFSET={offset or 0}, CURATOR_NUM_SHARDS={count}"
        else:
            raise ShardConfigError(
                f"CURATOR_NUM_SHARDS={count} is set but this process has no shard index: set CURATOR_SHARD_INDEX "
                "or run it as a Slurm array task"
            )
        if index >= count:
            raise ShardConfigError(
                f"shard index {index} ({origin}) is not below CURATOR_NUM_SHARDS={count}; raise CURATOR_NUM_SHARDS "
                "or fix the offset/index"
            )
        return index, count, origin

    if array_id is None:
        if index is not None:
            raise ShardConfigError(
                f"CURATOR_SHARD_INDEX={index} is set without CURATOR_NUM_SHARDS; set CURATOR_NUM_SHARDS too"
            )
        return 0, None, "not sharded"

    array_count = _int(env, "SLURM_ARRAY_TASK_COUNT", minimum=1)
    lo = _int(env, "SLURM_ARRAY_TASK_MIN", minimum=0)
    hi = _int(env, "SLURM_ARRAY_TASK_MAX", minimum=0)
    step = _int(env, "SLURM_ARRAY_TASK_STEP", minimum=1) or 1
    if array_count is None or lo is None or hi is None:
        raise ShardConfigError(
            f"SLURM_ARRAY_TASK_ID={array_id} is set but SLURM_ARRAY_TASK_COUNT/_MIN/_MAX are not; "
            "set CURATOR_NUM_SHARDS (and CURATOR_SHARD_OFFSET) explicitly"
        )
    if index is not None:
        origin = f"CURATOR_SHARD_INDEX={index}, SLURM_ARRAY_TASK_COUNT={array_count}"
        if index >= array_count:
            raise ShardConfigError(
                f"CURATOR_SHARD_INDEX={index} is not below SLURM_ARRAY_TASK_COUNT={array_count}; set CURATOR_NUM_SHARDS"
            )
        return index, array_count, origin
    regular = lo + (array_count - 1) * step == hi and (array_id - lo) % step == 0 and lo <= array_id <= hi
    if not regular:
        raise ShardConfigError(
            f"SLURM_ARRAY_TASK_ID={array_id} belongs to an irregular array (COUNT={array_count}, MIN={lo}, "
            f"MAX={hi}, STEP={step}), e.g. --array=0,5,17: its position cannot be derived. Set "
            f"CURATOR_NUM_SHARDS to the number of shards; each task then takes shard SLURM_ARRAY_TASK_ID"
        )
    index = (array_id - lo) // step
    return index, array_count, f"SLURM_ARRAY_TASK_ID={array_id} of --array={lo}-{hi}:{step}"


def available_cpus(environ: Mapping[str, str] | None = None) -> int:
    """CPUs this process may use: ``SLURM_CPUS_PER_TASK`` when set, else the affinity mask."""
    env = os.environ if environ is None else environ
    slurm = _int(
        env,
        "SLURM_CPUS_PER_TASK",
        minimum=1,
        fix="Slurm sets it from --cpus-per-task; unset it or fix it.",
        error=SettingError,
    )
    if slurm is not None:
        return slurm
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def _flag(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if raw == "":
        return default
    if raw in ("0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise SettingError(f"{name}={env[name]!r} is not a yes/no value; use 1 or 0")


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """A duration setting: a finite number of seconds >= 0, ``default`` when unset or empty."""
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise SettingError(f"{name}={raw!r} must be a finite number >= 0")
    return value


@dataclass(frozen=True)
class RunOptions:
    """How a run records its progress and reacts to preemption (defaults for ``Pipeline.run``).

    ``run_dir``: ``CURATOR_RUN_DIR``; ``accept_new_inputs``: ``CURATOR_ACCEPT_NEW_INPUTS=1`` lets a shard
    go on when the inputs changed since the run started; ``requeue``: ``CURATOR_REQUEUE=1`` asks Slurm to
    requeue the job after a stop signal; ``grace_seconds``: ``CURATOR_GRACE_SECONDS``, how long in-flight
    source tasks may finish after SIGTERM/SIGUSR1/SIGUSR2 (default 25, below Slurm's default KillWait of 30).
    """

    run_dir: str | None = None
    accept_new_inputs: bool = False
    requeue: bool = False
    grace_seconds: float = 25.0
    #: ``CURATOR_PLAN_OUT``: set by ``curator-slurm plan/submit``; the run lists its source tasks into
    #: this JSON file and exits without processing anything.
    plan_out: str | None = None
    #: ``CURATOR_PHASE``: set in the array tasks that `curator-slurm submit` starts for one phase of a
    #: workflow; ``Workflow.run`` then runs that phase's shard only.
    phase: str | None = None
    #: ``CURATOR_PIPELINE``: set by `curator-slurm local/submit` in the tasks of one step of a script that
    #: runs several pipelines or workflows (:mod:`curator_slurm.runs.steps`): only that run call does its work.
    pipeline: int | None = None
    #: ``CURATOR_LEDGER_WINDOW``: the ledger commits (makes outputs durable, then appends records with one
    #: fsync) every this many source tasks at most; 1 commits each on its own. A crash loses at most one
    #: window, whose tasks a resume does again.
    ledger_window: int = 1000
    #: ``CURATOR_LEDGER_WINDOW_SECONDS``: ... or once the window's first record is this old, or its tasks
    #: ran this long in all (so a crash costs at most about this much work, redone on resume).
    ledger_window_seconds: float = 0.5
    #: ``CURATOR_CLEAR_OUTPUT=1``: a run that starts afresh (its run directory is new) in an output that holds
    #: files its writer could have written, which no ledger of it accounts for, deletes them first; without it
    #: such a start is refused, naming them (they would be mixed with the new run's outputs).
    clear_output: bool = False
    #: ``CURATOR_PROGRESS_SECONDS``: every process of a run publishes what it is doing (source task, documents
    #: so far) in the run directory at most this often (:mod:`curator_slurm.runs.progress`); 0 publishes at
    #: every batch (tests), and `status` shows it.
    progress_seconds: float = 10.0
    #: ``CURATOR_STEAL``: a process that finished its shard takes over unstarted source tasks of shards still
    #: running (or whose process died), each claimed atomically in the run directory (on by default; ``0``
    #: turns it off: every shard does its own tasks and only those, as without a run directory).
    steal: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunOptions:
        """The options the ``CURATOR_*`` variables of ``environ`` (default: this process's) set."""
        return run_options(environ)


def run_options(environ: Mapping[str, str] | None = None) -> RunOptions:
    """The run options the ``CURATOR_*`` variables set (see :class:`RunOptions`)."""
    env = os.environ if environ is None else environ
    grace = _seconds(env, "CURATOR_GRACE_SECONDS", RunOptions.grace_seconds)
    window = _int(
        env, "CURATOR_LEDGER_WINDOW", minimum=1, fix="Set it to a number of records, 1 or more.", error=SettingError
    )
    window_seconds = _seconds(env, "CURATOR_LEDGER_WINDOW_SECONDS", RunOptions.ledger_window_seconds)
    return RunOptions(
        run_dir=env.get("CURATOR_RUN_DIR") or None,
        accept_new_inputs=_flag(env, "CURATOR_ACCEPT_NEW_INPUTS"),
        clear_output=_flag(env, "CURATOR_CLEAR_OUTPUT"),
        requeue=_flag(env, "CURATOR_REQUEUE"),
        grace_seconds=grace,
        plan_out=env.get("CURATOR_PLAN_OUT") or None,
        phase=(env.get("CURATOR_PHASE") or "").strip() or None,
        pipeline=_int(
            env,
            "CURATOR_PIPELINE",
            minimum=0,
            fix="It is set by curator-slurm local/submit; unset it.",
            error=SettingError,
        ),
        ledger_window=window if window is not None else RunOptions.ledger_window,
        ledger_window_seconds=window_seconds,
        progress_seconds=_seconds(env, "CURATOR_PROGRESS_SECONDS", RunOptions.progress_seconds),
        steal=_flag(env, "CURATOR_STEAL", default=True),
    )


#: ``CURATOR_*`` variables that say how every process of a run works, not which shard one is: a job's
#: environment keeps them (:func:`job_environment`).
CONFIGURATION_VARIABLES = frozenset({"CURATOR_STEAL", "CURATOR_PROGRESS_SECONDS"})


def job_environment(environ: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a process that must decide its own shard: this one without any ``CURATOR_*``
    variable or any ``SLURM_*`` variable (but ``SLURM_CONF``) that it would otherwise inherit, e.g. the
    step and rank of an ``srun`` the user happens to submit from; plus ``extra``. ``CURATOR_S3_*`` (how to
    talk to the object store: attempts, backoff, start delay), ``CURATOR_PROGRESS_SECONDS`` and ``CURATOR_STEAL``
    (whether shards take over each other's work) are configuration, not a shard's, and stay."""
    env = os.environ if environ is None else environ
    clean = {
        k: v
        for k, v in env.items()
        if (not k.startswith("CURATOR_") or k.startswith("CURATOR_S3_") or k in CONFIGURATION_VARIABLES)
        and (not k.startswith("SLURM_") or k == "SLURM_CONF")
    }
    clean.update(extra or {})
    return clean


def ray_address(environ: Mapping[str, str] | None = None) -> str | None:
    """The Ray cluster a RayExecutor joins: ``RAY_ADDRESS`` when set (``ray start --head`` prints it), else
    None (the executor starts a local Ray). Read in the driver only; Ray workers never look at it."""
    env = os.environ if environ is None else environ
    return (env.get("RAY_ADDRESS") or "").strip() or None


def ray_expected_nodes(environ: Mapping[str, str] | None = None) -> int | None:
    """How many nodes the Ray cluster at ``RAY_ADDRESS`` should have (``CURATOR_RAY_NODES``, exported by
    multi-node array tasks): a RayExecutor waits for them to join before it places its actors."""
    env = os.environ if environ is None else environ
    return _int(
        env, "CURATOR_RAY_NODES", minimum=1, fix="Set it to the number of nodes of the Ray cluster.", error=SettingError
    )


def limit_tokenizer_threads(threads: int, environ: MutableMapping[str, str] | None = None) -> None:
    """Size the thread pool of Hugging Face ``tokenizers`` in this process, before its first encode: it reads
    ``TOKENIZERS_PARALLELISM`` and rayon's ``RAYON_NUM_THREADS`` (its pool has one thread per core unless
    told). ``threads=1`` turns its parallelism off (a batch is encoded on the calling thread: N workers on N
    cores, not N x N threads); ``threads=k`` gives the pool k threads. The Megatron writer calls it in its
    worker's ``setup()``; nothing reads these variables back."""
    env = os.environ if environ is None else environ
    if threads <= 1:
        env["TOKENIZERS_PARALLELISM"] = "false"
    else:
        env["TOKENIZERS_PARALLELISM"] = "true"
        env["RAYON_NUM_THREADS"] = str(threads)


@dataclass(frozen=True)
class S3Settings:
    """What the environment says about S3 (the filesystem layer's defaults; ``fs.configure_s3`` wins over them).

    ``endpoint_url``: ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL`` (as boto3 reads them); ``region``:
    ``AWS_REGION``, else ``AWS_DEFAULT_REGION``; ``anonymous``: ``CURATOR_S3_ANONYMOUS=1`` (public buckets, no
    credentials); ``max_attempts``: ``CURATOR_S3_MAX_ATTEMPTS``, else ``AWS_MAX_ATTEMPTS`` (attempts per
    request, the first included); ``retry_base``/``retry_cap``: ``CURATOR_S3_RETRY_BASE``/``_CAP``, seconds of the
    backoff; ``start_delay``: ``CURATOR_S3_START_DELAY``, the longest random wait of an array task before its
    first request. Credentials are not read here: the AWS SDK's own chain reads ``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and the AWS files, so they are never held
    by curator-slurm's objects."""

    endpoint_url: str | None = None
    region: str | None = None
    anonymous: bool = False
    max_attempts: int = 10
    retry_base: float = 0.1
    retry_cap: float = 20.0
    start_delay: float = 0.0


def s3_settings(environ: Mapping[str, str] | None = None) -> S3Settings:
    """The :class:`S3Settings` of ``environ`` (default: this process's); bad values name the variable."""
    env = os.environ if environ is None else environ

    def text(*names: str) -> str | None:
        return next((env[n].strip() for n in names if (env.get(n) or "").strip()), None)

    endpoint_name = next((n for n in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL") if (env.get(n) or "").strip()), None)
    if endpoint_name is not None and "@" in env[endpoint_name]:
        raise SettingError(
            f"{endpoint_name} holds credentials (user:password@...); give the server alone (http(s)://host:port) "
            "and the credentials as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE"
        )
    attempts_name = next((n for n in ("CURATOR_S3_MAX_ATTEMPTS", "AWS_MAX_ATTEMPTS") if env.get(n)), None)
    attempts = None
    if attempts_name is not None:
        fix = "Set it to the number of attempts per S3 request, 1 or more."
        attempts = _int(env, attempts_name, minimum=1, fix=fix, error=SettingError)
    return S3Settings(
        endpoint_url=text("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
        region=text("AWS_REGION", "AWS_DEFAULT_REGION"),
        anonymous=_flag(env, "CURATOR_S3_ANONYMOUS"),
        max_attempts=attempts if attempts is not None else S3Settings.max_attempts,
        retry_base=_seconds(env, "CURATOR_S3_RETRY_BASE", S3Settings.retry_base),
        retry_cap=_seconds(env, "CURATOR_S3_RETRY_CAP", S3Settings.retry_cap),
        start_delay=_seconds(env, "CURATOR_S3_START_DELAY", S3Settings.start_delay),
    )

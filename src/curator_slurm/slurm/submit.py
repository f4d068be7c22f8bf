"""Rendering and submitting sbatch arrays: small pure functions plus the few calls to Slurm.

A submission of N logical shards becomes one or more arrays whose indices stay below the cluster's
``MaxArraySize`` (and within ``max_array_tasks``); every task of every array gets
``CURATOR_NUM_SHARDS=N`` and its array's ``CURATOR_SHARD_OFFSET``, so shard = offset + array index.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from curator_slurm.errors import CuratorError, OptionError, RunDirError
from curator_slurm.slurm.env import job_environment

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
class SubmitOptions:
    """Everything that goes into the sbatch script(s) of one submission."""

    script: str
    script_args: tuple[str, ...] = ()
    shards: int = 1
    run_dir: str = ""
    throttle: int | None = None
    time: str | None = None
    partition: str | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    gpus_per_task: int | None = None
    nodes_per_task: int = 1
    job_name: str = "curator"
    output_logs: str = ""
    signal: str | None = None
    requeue: bool = False
    sbatch_args: tuple[str, ...] = ()
    env_setup: tuple[str, ...] = ()
    python: str = field(default_factory=lambda: sys.executable)
    #: ``hash`` or ``balanced`` (CURATOR_SHARD_STRATEGY in every task); None: the default, hash.
    strategy: str | None = None
    #: CURATOR_ACCEPT_NEW_INPUTS=1 in every task: go on when the inputs listed differ from the run's first.
    accept_new_inputs: bool = False
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
    for name, value in (
        ("time", opts.time),
        ("partition", opts.partition),
        ("cpus-per-task", opts.cpus_per_task),
        ("mem", opts.mem),
        ("gpus-per-task", opts.gpus_per_task),
        ("signal", opts.signal),
    ):
        if value is not None:
            lines.append(_directive(name, value))
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
    if opts.strategy:
        env["CURATOR_SHARD_STRATEGY"] = opts.strategy
    if opts.requeue:
        env["CURATOR_REQUEUE"] = "1"
    if opts.accept_new_inputs:
        env["CURATOR_ACCEPT_NEW_INPUTS"] = "1"
    lines.extend(f"export {k}={shlex.quote(v)}" for k, v in env.items())
    command = shlex.join([opts.python, opts.script, *opts.script_args])
    if opts.nodes_per_task == 1:
        # exec: the pipeline becomes the batch step, so signals (--signal=B:..., scancel -b) reach it.
        lines.append(f"exec {command}")
    else:
        lines += _ray_cluster_block(opts, command)
    return "\n".join(lines) + "\n"


#: Seconds a multi-node task waits for its Ray head to listen before it gives up.
HEAD_START_SECONDS = 300

#: What runs Ray on one node of a multi-node task, as the task of an srun step of its own: ``ray start
#: --block`` with a temporary directory for this task on this node. On SIGUSR1 (the batch script's way
#: to end the steps: ``scancel --signal=USR1`` reaches every step but the batch one, while SIGTERM to
#: srun would make it kill its step at once) or SIGTERM (scancel, the time limit), or when Ray ends on
#: its own, every Ray process of that directory (``ray start``, raylet, GCS, ...; their workers exit
#: with their raylet) gets TERM, then KILL 4 s later (a worker node's raylet may wait a long time for a
#: head that is going away), and the directory is removed: done in about 5 s, within Slurm's KillWait,
#: so nothing of the task stays on any node. The processes are found by the directory in their command
#: line, never by name; ``-z`` makes each argument a line and ``\(/\|$\)`` keeps the search from
#: finding itself.
_RAY_NODE = r"""tmp="/tmp/curator-ray-${SLURM_JOB_ID}-${SLURMD_NODENAME}"
"$@" --temp-dir="$tmp" &
stopped=0
trap 'stopped=1' TERM INT USR1
status=0
wait $! || status=$?
[ "$stopped" = 1 ] && status=0  # stopped on purpose: not an error of this node
left() { grep -lsz -- "$tmp\(/\|$\)" /proc/[0-9]*/cmdline | sed 's,^/proc/\([0-9]*\)/cmdline$,\1,'; }
for sig in TERM TERM TERM TERM KILL; do
  pids="$(left)"
  [ -z "$pids" ] && break
  kill -s "$sig" $pids 2>/dev/null
  sleep 1
done
rm -rf "$tmp"
exit "$status"
"""


def _ray_cluster_block(opts: SubmitOptions, command: str) -> list[str]:
    """Start Ray over this task's nodes (head on the node of the batch step), run the pipeline against
    it, stop Ray and remove its files on every node.

    Addresses: the head advertises (``--node-ip-address``) and ``RAY_ADDRESS`` names the address
    Slurm's ``NodeAddr`` (or the node name) resolves to, unless that is loopback (Debian's
    ``/etc/hosts`` maps the host's own name to 127.0.1.1), then the node's first non-loopback one;
    the other nodes join from the address of their route to the head (Ray's own choice).
    Authentication: a random token per task in ``RAY_AUTH_MODE=token`` / ``RAY_AUTH_TOKEN``, which
    every ``srun`` step and the pipeline inherit (Ray versions without token authentication ignore
    them); it is in no file and no log. ``RAY_AUTH_MODE`` set by ``--env-setup`` is kept.
    """
    ray = shlex.quote(os.path.join(os.path.dirname(opts.python), "ray"))
    cpus = opts.cpus_per_task or "${SLURM_CPUS_ON_NODE}"
    wait = HEAD_START_SECONDS
    node_step = 'bash -c "$ray_node" ray-node'
    return [
        'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))',
        'head_node="${SLURMD_NODENAME:-${nodes[0]}}"  # the batch step runs on the first node: the head',
        "# The address the other nodes reach the head at (see _ray_cluster_block in curator_slurm.slurm.submit).",
        "# (Each lookup may fail: '|| true', so that the check below says what is wrong.)",
        'head="$(scontrol show node -o "$head_node" | sed -n "s/.*NodeAddr=\\([^ ]*\\).*/\\1/p" || true)"',
        'head="$(getent ahostsv4 "${head:-$head_node}" | awk "NR == 1 {print \\$1}" || true)"',
        'case "$head" in ""|127.*) head="$(hostname -I 2>/dev/null | awk "{print \\$1}" || true)" ;; esac',
        'if [ -z "$head" ]; then',
        '  echo "curator-slurm: no non-loopback IPv4 address on $head_node for the Ray head" >&2',
        "  exit 1",
        "fi",
        "port=$((20000 + SLURM_JOB_ID % 40000))  # every array task has its own job id, so its own port",
        'export RAY_ADDRESS="$head:$port"',
        'export CURATOR_RAY_NODES="${#nodes[@]}"  # the pipeline waits for them all to join',
        "# This array task for scancel: its SLURM_JOB_ID may be the array's id, which would name every task.",
        'this_task="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}}"',
        'this_task="${this_task:-$SLURM_JOB_ID}"',
        'export RAY_AUTH_MODE="${RAY_AUTH_MODE:-token}"  # one random token per task, for every node',
        'export RAY_AUTH_TOKEN="$(od -An -tx1 -N32 /dev/urandom | tr -d " \\n")"',
        "read -r -d '' ray_node <<'END_OF_RAY_NODE' || true",
        *_RAY_NODE.splitlines(),
        "END_OF_RAY_NODE",
        'echo "curator-slurm: Ray head on $head_node at $RAY_ADDRESS; nodes: ${nodes[*]}"',
        f'srun --nodes=1 --ntasks=1 -w "$head_node" {node_step} {ray} start --head --block --port="$port" '
        f'--num-cpus={cpus} --node-ip-address="$head" --include-dashboard=false &',
        "waited=0  # until the head listens on its port: a loaded node may take a while",
        'until (exec 3<>"/dev/tcp/$head/$port") 2>/dev/null; do',
        f'  if [ "$waited" -ge {wait} ]; then',
        f'    echo "curator-slurm: the Ray head on $head_node at $head:$port did not start in {wait} s '
        '(see its output above)" >&2',
        '    scancel --signal=USR1 "$this_task" 2>/dev/null || true',
        "    wait",
        "    exit 1",
        "  fi",
        "  sleep 1",
        "  waited=$((waited + 1))",
        "done",
        'for node in "${nodes[@]}"; do',
        '  [ "$node" = "$head_node" ] && continue',
        f'  srun --nodes=1 --ntasks=1 -w "$node" {node_step} {ray} start --block --address="$RAY_ADDRESS" '
        f"--num-cpus={cpus} &",
        "done",
        f"{command} &",
        "child=$!",
        'for sig in TERM USR1 USR2; do trap "kill -s $sig $child 2>/dev/null || true" $sig; done',
        "status=0",
        'wait "$child" || status=$?',
        'while kill -0 "$child" 2>/dev/null; do wait "$child" || status=$?; done',
        "# Stop this task's Ray by ending its srun steps (`ray stop` would end every Ray on the node,",
        "# those of other array tasks sharing it too): SIGUSR1 to every step but this batch step makes",
        "# each stop its node's Ray and remove its files (SIGTERM would make srun kill its step at once).",
        'scancel --signal=USR1 "$this_task" 2>/dev/null || true',
        'for _ in $(seq 30); do [ -z "$(jobs -rp)" ] && break; sleep 1; done',
        "kill $(jobs -p) 2>/dev/null || true",
        "wait",
        'exit "$status"',
    ]


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


#: Array task states in which the task may still do work.
ACTIVE_STATES = frozenset(
    {"RUNNING", "PENDING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",
     "SIGNALING", "STAGE_OUT", "SUSPENDED", "STOPPED"}
)  # fmt: skip
#: Array task states of a task that ended without completing (its shard's unrecorded work is not done).
ENDED_BADLY_STATES = frozenset(
    {"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED",
     "REVOKED", "SPECIAL_EXIT"}
)  # fmt: skip


def job_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """State of every task of ``job_ids`` that Slurm still knows (``123_4`` → RUNNING, FAILED, ...), ended
    ones included (``squeue -t all``: they stay known for ``MinJobAge`` seconds); None without Slurm.

    A job Slurm has forgotten is left out. When squeue refuses the whole list because some ids are
    forgotten, each id is asked on its own, so the ones still known are not lost with them.
    """
    if not job_ids or shutil.which("squeue") is None:
        return None
    stdout, stderr, ok = _squeue(job_ids)
    if not ok:
        if "Invalid job id" not in stderr:
            return None
        if len(job_ids) == 1:
            return {}  # older than MinJobAge: forgotten, so neither queued nor running
        states: dict[str, str] = {}
        for job in job_ids:
            one = job_states([job])
            if one is None:
                return None
            states.update(one)
        return states
    states = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def _squeue(job_ids: Sequence[str]) -> tuple[str, str, bool]:
    proc = subprocess.run(
        ["squeue", "-h", "-r", "-t", "all", "-j", ",".join(job_ids), "-o", "%i %T"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.stdout, proc.stderr, proc.returncode == 0

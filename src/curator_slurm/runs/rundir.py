"""The run directory: which pipeline and inputs it belongs to, who works in it, and its ledger. Layout:
docs/reference.md, "The run directory"."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import xxhash

from curator_slurm import fs
from curator_slurm.errors import RunDirError, ShardConfigError, is_out_of_space, out_of_space
from curator_slurm.runs.fingerprint import difference as _difference
from curator_slurm.runs.fingerprint import fingerprint_digest
from curator_slurm.runs.layout import (
    CLAIMS_DIR,
    DEFAULT_RUN_DIR_NAME,
    REFUSALS_DIR,
    RUN_FILE,
    SOURCE_IDS_DIR,
    SOURCES_FILE,
)
from curator_slurm.runs.ledger import LedgerState, LedgerWriter, load_status
from curator_slurm.runs.readfile import JSON_BYTES, LEDGER_BYTES, SMALL_BYTES, read_bytes
from curator_slurm.settings import RunOptions
from curator_slurm.shard import ShardSpec
from curator_slurm.stages.io.writers import atomic_write

logger = logging.getLogger(__name__)


def default_run_dir_of(place: str | os.PathLike) -> str:
    """Where the run directory of an output (or a workflow's work directory) ``place`` goes by default.

    A local ``place``: inside it, ``<place>/.curator-run`` (as always). An object-store URI: the run directory
    needs a POSIX filesystem (its ledger appends, its claims and markers are files that are created exclusively
    and renamed), so it stays local, under the working directory, named after the URI:
    ``<cwd>/.curator-run/s3/<bucket>/<prefix>``. Array tasks find the same place because ``submit`` starts
    them in the directory it was run from (the script's ``cd``), which must then be on a filesystem every
    node mounts, as the script itself is; ``CURATOR_RUN_DIR`` or ``run_dir=`` puts it anywhere else."""
    text = fs.absolute(place)
    if fs.is_local(text):
        return os.path.join(text, DEFAULT_RUN_DIR_NAME)
    kind, rest = text.split("://", 1)
    return os.path.join(os.getcwd(), DEFAULT_RUN_DIR_NAME, kind, *[p for p in rest.split("/") if p])


def local_run_dir(path: str | os.PathLike, what: str = "run directory") -> str:
    """``path`` as an absolute local path; a URI is a RunDirError before any work, saying why and what to do."""
    text = os.fspath(path)
    if fs.is_uri(text):
        raise RunDirError(
            f"{what} {text}: a run directory must be on a POSIX filesystem (local or shared, e.g. NFS or Lustre) "
            "because its ledger is appended to and its claims are created exclusively, which object stores "
            "cannot do; outputs may be on object storage, the run directory may not. Set CURATOR_RUN_DIR "
            "(or run_dir=) to a directory every array task sees, or leave it unset for the default "
            "(<working directory>/.curator-run/<scheme>/<bucket>/<prefix>)"
        )
    return fs.absolute(text)


def source_digest(task_ids: Sequence[str]) -> str:
    """Order-independent digest of a set of source task ids."""
    h = xxhash.xxh64(seed=0)
    for t in sorted(task_ids):
        h.update(t.encode("utf-8") + b"\n")
    return h.hexdigest()


#: What to do about a damaged file that runs write (run.json, sources.json).
RERUN_REMEDY = "restore it, or delete it and run the pipeline again to write it afresh"


def read_json(path: str, remedy: str) -> dict[str, Any]:
    """A JSON file of the run directory. A damaged one (a full disk, an interrupted copy) is a
    RunDirError that names the file and the place, and says what to do (``remedy``)."""
    raw = read_bytes(path, JSON_BYTES)  # a regular file of bounded size, or a RunDirError naming it
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RunDirError(f"{path}: not UTF-8 text (byte {e.start}); {remedy}") from e
    except json.JSONDecodeError as e:
        raise RunDirError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg}); {remedy}") from e
    if not isinstance(value, dict):
        raise RunDirError(f"{path}: holds a JSON {type(value).__name__}, not an object; {remedy}")
    return value


def _write_once(path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Create ``path`` with ``payload`` unless it exists; return what the file holds.

    The content goes to a hidden temporary file that is hard-linked into place, so a reader never sees
    a half-written file and exactly one of many concurrent creators wins. When the file exists (every
    process but the first), nothing is written at all; the temporary file never outlives the call.
    """
    if os.path.exists(path):
        return read_json(path, RERUN_REMEDY)
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
        return payload
    except FileExistsError:
        return read_json(path, RERUN_REMEDY)
    except OSError as e:
        if is_out_of_space(e):
            raise out_of_space(e, directory) from e
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class RunDir:
    """A run directory: checks that it belongs to this pipeline and input set, and hands out the ledger.

    Args:
        path: a local (or shared POSIX) directory, created by :meth:`claim`; a URI is a RunDirError.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = local_run_dir(path)

    def __repr__(self) -> str:
        return f"RunDir({self.path!r})"

    def claim(self, fingerprint: dict[str, Any]) -> None:
        """Record the pipeline fingerprint, or check it matches the one recorded by the first process."""
        os.makedirs(self.path, exist_ok=True)
        want = {"fingerprint": fingerprint_digest(fingerprint), "pipeline": fingerprint}
        have = _write_once(os.path.join(self.path, RUN_FILE), want)
        if have.get("fingerprint") != want["fingerprint"]:
            raise RunDirError(
                f"{self.path} belongs to another pipeline: it was created by fingerprint {have.get('fingerprint')}, "
                f"this pipeline is {want['fingerprint']}; {_difference(have.get('pipeline'), fingerprint)}. Use "
                "another run directory (run_dir= or CURATOR_RUN_DIR), or delete it to start over (its outputs "
                "too, or run with CURATOR_CLEAR_OUTPUT=1 so that the new run deletes them first)."
            )

    def check_sources(
        self, task_ids: Sequence[str], accept_new_inputs: bool = False, weights: Sequence[int] | None = None
    ) -> None:
        """Make sure this process sees the same source tasks as the first one did, and, when ``weights``
        are given (the balanced strategy assigns by them), the same sizes."""
        want = source_record(task_ids, weights)
        path = os.path.join(self.path, SOURCES_FILE)
        if not os.path.exists(path):
            save_source_ids(self.path, task_ids, want["digest"])  # before the record that names it
        have = _write_once(path, want)
        if _compare_sources(self.path, have, want, weights is not None, accept_new_inputs):
            # Accepted: the listing is now this one (status counts the tasks of the current listing).
            save_source_ids(self.path, task_ids, want["digest"])
            want["replaced"] = int(have.get("replaced") or 0) + 1
            fs.atomic_write_text(path, json.dumps(want, indent=1, sort_keys=True))

    def claim_shard(self, shard: ShardSpec) -> None:
        """Inside a Slurm job, record that this process does ``shard`` in this job step (a claim file
        per shard and step under ``claims/<job id>/``); a second process of the same step that claims it
        (two srun ranks given the same ``SLURM_PROCID``, or the script started twice in one batch step)
        is refused, so the work is not done twice while another shard's is never done."""
        job = shard.job
        if not job.job_id:
            return
        step = job.step_id or "batch"
        directory = os.path.join(self.path, CLAIMS_DIR, job.job_id)
        os.makedirs(directory, exist_ok=True)
        name = f"step{step}-r{job.restart_count}-shard{shard.index}of{shard.count}"
        me = f"{job.host} {os.getpid()} procid={job.procid}"
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = read_bytes(path, SMALL_BYTES).decode("utf-8", "replace").strip()
            if holder.split(" procid=")[0] == me.split(" procid=")[0]:
                return  # this very process (a second pipeline of the same script)
            if _ended_here(holder, job.host):  # an earlier run of the script in this step, since ended
                with open(path, "w", encoding="utf-8") as f:
                    f.write(me + "\n")
                return
            raise ShardConfigError(
                f"{shard.label} is already being done by another process of job {job.job_id} step {step} ({holder}; "
                f"this one: {me}); two processes of one step computed the same shard ({shard.origin}). Every task of "
                "an srun step needs its own SLURM_PROCID (srun sets it: do not override it), and every array task "
                "its own SLURM_ARRAY_TASK_ID / CURATOR_SHARD_INDEX; or start the script once per step"
            ) from None
        except OSError as e:
            if is_out_of_space(e):
                raise out_of_space(e, directory) from e
            raise
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(me + "\n")

    def record_refusal(self, shard: ShardSpec, error: BaseException) -> None:
        """Inside a Slurm job, keep why this directory refused this task (another pipeline's fingerprint,
        changed inputs, a shard claimed twice), so that `curator-slurm failures` says why the task ended without
        recording any work. Best effort: failing to write it must not hide ``error``."""
        job = shard.job
        if not job.job_id:
            return  # a process run by hand shows the error itself
        name = f"{job.array_job_id}_{job.array_task_id}" if job.array_job_id and job.array_task_id else job.job_id
        record = {"job": name, "shard": shard.label, "host": job.host, "error": f"{type(error).__name__}: {error}"}
        directory = os.path.join(self.path, REFUSALS_DIR)
        try:
            os.makedirs(directory, exist_ok=True)
            atomic_write(os.path.join(directory, f"{name}.json"), lambda f: f.write(json.dumps(record).encode()))
        except OSError as e:
            logger.warning(f"could not record in {directory} why the run directory refused this task: {e}")

    def state(self, shard: ShardSpec | None = None, task_ids: Iterable[str] | None = None) -> LedgerState:
        """What the ledger says; with ``shard`` (and its source tasks ``task_ids``), what it says about that
        shard's source tasks (and possibly more): only the files that can hold their records are read (see
        :func:`load_status`)."""
        return load_status(self.path, shard, task_ids)

    def writer(self, shard: ShardSpec, options: RunOptions | None = None) -> LedgerWriter:
        """This process's ledger writer, with the group-commit window of ``options``."""
        options = options or RunOptions()
        return LedgerWriter(self.path, shard, options.ledger_window, options.ledger_window_seconds)


def load_refusals(run_dir: str) -> dict[str, dict[str, Any]]:
    """The refusals recorded by :meth:`RunDir.record_refusal`, by job (``123_4``); unreadable ones skipped."""
    directory = os.path.join(run_dir, REFUSALS_DIR)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if name.endswith(".json") and not name.startswith("."):
            try:
                record = read_json(os.path.join(directory, name), RERUN_REMEDY)
            except RunDirError:
                continue
            out[str(record.get("job", name[:-5]))] = record
    return out


def _ended_here(holder: str, host: str) -> bool:
    """Whether the claim ``holder`` (``host pid ...``) is a process of this host that no longer runs."""
    parts = holder.split()
    if len(parts) < 2 or parts[0] != host or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _ids_path(run_dir: str, digest: str) -> str:
    return os.path.join(run_dir, SOURCE_IDS_DIR, f"{digest}.ids")


def save_source_ids(run_dir: str, task_ids: Sequence[str], digest: str) -> None:
    """Keep the source task ids of a listing (its ``digest``) as sorted 64-bit hashes, 8 bytes a task, for
    `status` to count the done tasks of the current listing only."""
    path = _ids_path(run_dir, digest)
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = np.sort(id_hashes(task_ids)).tobytes()
    atomic_write(path, lambda f: f.write(data))


def id_hashes(task_ids: Iterable[str]) -> np.ndarray:
    """xxh64 of each source task id, as uint64."""
    h = xxhash.xxh64_intdigest
    return np.fromiter((h(t.encode("utf-8", "surrogateescape")) for t in task_ids), dtype=np.uint64)


def listing_replaced(run_dir: str) -> bool:
    """Whether accepted new inputs replaced the run's first listing (then done tasks of inputs no longer listed
    may be in its ledger: `status` counts the current listing's only)."""
    try:
        return bool(read_json(os.path.join(run_dir, SOURCES_FILE), RERUN_REMEDY).get("replaced"))
    except (OSError, RunDirError):
        return False


def current_source_ids(run_dir: str) -> np.ndarray | None:
    """The hashes (:func:`id_hashes`) of the current listing's source tasks, sorted; None when the run did not
    keep them (written before they were kept, or no process has listed yet)."""
    try:
        digest = read_json(os.path.join(run_dir, SOURCES_FILE), RERUN_REMEDY).get("digest")
        data = read_bytes(_ids_path(run_dir, str(digest)), LEDGER_BYTES)
        return np.frombuffer(data[: len(data) // 8 * 8], dtype=np.uint64)
    except (OSError, RunDirError):
        return None


def source_record(task_ids: Sequence[str], weights: Sequence[int] | None = None) -> dict[str, Any]:
    """What ``sources.json`` holds for these source task ids (and weights, under the balanced strategy)."""
    want: dict[str, Any] = {"count": len(task_ids), "digest": source_digest(task_ids)}
    if weights is not None:
        want["weights_digest"] = source_digest([f"{t}\t{w}" for t, w in zip(task_ids, weights, strict=False)])
    return want


def check_submission(
    run_dir: str,
    fingerprint: dict[str, Any] | None,
    task_ids: Sequence[str],
    weights: Sequence[int] | None = None,
    accept_new_inputs: bool = False,
) -> None:
    """Before any array is submitted into ``run_dir``: what every task would check as it starts (the
    pipeline's fingerprint against ``run.json``, the listed source tasks against ``sources.json``), so a
    submission that could only fail in every task is refused with the reason, not queued. Writes nothing."""
    run_file = os.path.join(run_dir, RUN_FILE)
    if fingerprint is not None and os.path.exists(run_file):
        have = read_json(run_file, RERUN_REMEDY)
        digest = fingerprint_digest(fingerprint)
        if have.get("fingerprint") != digest:
            raise RunDirError(
                f"{run_dir} belongs to another pipeline: it was created by fingerprint {have.get('fingerprint')}, "
                f"this pipeline is {digest}; {_difference(have.get('pipeline'), fingerprint)}. Every array task "
                "would stop at once. Submit with another --run-dir (or output directory), or delete the run "
                "directory to start over."
            )
    sources_file = os.path.join(run_dir, SOURCES_FILE)
    if os.path.exists(sources_file):
        have = read_json(sources_file, RERUN_REMEDY)
        want = source_record(task_ids, weights)
        _compare_sources(run_dir, have, want, weights is not None, accept_new_inputs, fixed_listing=True)


def _compare_sources(
    path: str,
    have: dict[str, Any],
    want: dict[str, Any],
    weighted: bool,
    accept_new_inputs: bool,
    fixed_listing: bool = False,
) -> bool:
    """Raise (or warn, when new inputs are accepted) if ``want`` lists other source tasks than ``have``; True
    when it does and that was accepted. ``fixed_listing``: every task will take the same listing (a submitted
    plan), so the balanced strategy can take new inputs too."""
    want = dict(want)
    same_ids = have.get("digest") == want["digest"]
    if same_ids:
        if not weighted or have.get("weights_digest", want["weights_digest"]) == want["weights_digest"]:
            return False
        want["digest"] = f"{want['digest']}, with other file sizes"
    if weighted and accept_new_inputs and not fixed_listing:
        raise RunDirError(
            f"{path}: this process lists other source tasks or sizes than the first one did (digest "
            f"{have.get('digest')}, now {want['digest']}), and the balanced strategy assigns tasks to shards by the "
            "whole listing: shards that list different inputs would leave some tasks to no shard, so new inputs "
            "cannot be accepted under it. Submit with `curator-slurm submit` (its plan fixes the listing for every "
            "task), use CURATOR_SHARD_STRATEGY=hash, or start afresh in a new run directory."
        )
    if not same_ids and have.get("count") == want["count"]:
        message = (
            f"{path}: this process lists the same number of source tasks as the first one "
            f"({want['count']}) but with other ids (digest {have.get('digest')}, now {want['digest']}): either "
            "an input file changed size and the source stage names its tasks by byte ranges (split_files / "
            "blocksize: restore the file, or start over in a new run directory), or the source stage probably "
            "does not give deterministic ids (uuid4(), hash() of a string, a counter over an unordered listing, a time "
            "stamp), so shards cannot agree on who does what"
        )
        if not accept_new_inputs:
            raise RunDirError(
                message + ". Derive each source task id from the work itself, e.g. "
                "curator_slurm.tasks.content_id(*sorted_paths) or FileGroupTask.from_paths, then start over "
                "with a new run directory. If the inputs were really renamed or replaced, use a new run "
                "directory too."
            )
        logger.warning(message + "; going on because new inputs are accepted (outputs may be duplicated)")
        return True
    message = (
        f"{path}: the inputs changed since this run started: the first process saw {have.get('count')} "
        f"source tasks (digest {have.get('digest')}), this one sees {want['count']} (digest {want['digest']})"
    )
    if not accept_new_inputs:
        raise RunDirError(
            message + ". Shards that list different inputs cannot split them exactly once. Restore the "
            "inputs, use a new run directory, or set CURATOR_ACCEPT_NEW_INPUTS=1 to go on anyway."
        )
    logger.warning(message + "; going on because new inputs are accepted")
    return True

"""The Ray session of a run: join a cluster (waiting for the nodes a multi-node array task started) or
start a local Ray, and undo exactly what was done at the end. Ray is imported only inside functions."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from curator_slurm.errors import CuratorError
from curator_slurm.runs.signals import handlers_kept
from curator_slurm.settings import available_cpus, ray_address, ray_expected_nodes
from curator_slurm.shard import ShardSpec

#: Ray logs this notice at WARNING on every local start; it is Ray's default, not the user's concern.
_RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


class RayNodesMissingError(CuratorError, RuntimeError):
    """Fewer nodes than ``CURATOR_RAY_NODES`` joined the Ray cluster within ``node_wait_seconds``."""


@dataclass(frozen=True)
class Session:
    """What this executor did to get Ray, so that it undoes exactly that."""

    started: bool
    where: str
    temp_dir: str | None = None


@dataclass(frozen=True)
class SessionOptions:
    """How to get Ray: the :class:`~curator_slurm.backends.ray.RayExecutor` arguments that concern it."""

    address: str | None = None
    num_cpus: int | None = None
    temp_dir: str | None = None
    object_store_memory: int | None = None
    node_wait_seconds: float = 300.0


def connect(options: SessionOptions, shard: ShardSpec, log: Any) -> Session:
    """Ray for this run: the instance this process already uses, the cluster at ``options.address`` (else
    ``RAY_ADDRESS``; ``"local"`` forces a new local Ray), or a new local one sized to the CPUs this process
    may use. The driver's signal handlers survive ``ray.init``, which replaces them."""
    import ray

    if ray.is_initialized():
        return Session(started=False, where="the Ray instance this process already uses")
    address = options.address or ray_address()
    auth_logger = logging.getLogger(_RAY_AUTH_LOGGER)
    auth_level = auth_logger.level
    auth_logger.setLevel(logging.ERROR)
    try:
        with handlers_kept():
            if address and address != "local":
                _match_ray_start_auth()
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
                try:
                    nodes = _wait_for_nodes(ray, ray_expected_nodes(), address, options.node_wait_seconds, shard, log)
                except BaseException:
                    ray.shutdown()
                    raise
                return Session(started=True, where=f"the Ray cluster at {address} ({nodes} node(s))")
            temp_dir = options.temp_dir or _default_temp_dir(shard)
            os.makedirs(temp_dir, exist_ok=True)
            cpus = options.num_cpus or available_cpus()
            ray.init(
                num_cpus=cpus,
                include_dashboard=False,
                _temp_dir=temp_dir,
                object_store_memory=options.object_store_memory,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
            return Session(started=True, where=f"a local Ray ({cpus} CPUs, files in {temp_dir})", temp_dir=temp_dir)
    finally:
        auth_logger.setLevel(auth_level)


def disconnect(session: Session, keep_files: bool, log: Any) -> None:
    """Shut down the Ray this run started (nothing when it joined one already running), removing its files
    unless ``keep_files`` (a run that failed or lost a worker keeps Ray's logs, and says where)."""
    import ray

    if not session.started:
        return
    ray.shutdown()
    if session.temp_dir is not None:
        if keep_files:
            log.warning(f"Ray's logs of this run are kept in {session.temp_dir}")
        else:
            shutil.rmtree(session.temp_dir, ignore_errors=True)


def _default_temp_dir(shard: ShardSpec) -> str:
    """A short, per-job, per-process directory: Ray's unix socket paths under it must stay below the
    107-character limit, and concurrent runs (srun steps share a job id) must not share it."""
    base = "/tmp" if os.access("/tmp", os.W_OK) else tempfile.gettempdir()
    job = shard.job.job_id
    return os.path.join(base, f"curator-ray-{job}-{os.getpid()}" if job else f"curator-ray-{os.getpid()}")


def _wait_for_nodes(ray: Any, expected: int | None, address: str, wait: float, shard: ShardSpec, log: Any) -> int:
    """Alive nodes of the cluster, after waiting up to ``wait`` seconds for ``expected`` of them
    (``CURATOR_RAY_NODES``, exported by a multi-node array task): actors are placed on the nodes there
    are when they start, so a node that joins late would idle, and one that never joins is a broken
    task (wrong address, token or firewall), which :class:`RayNodesMissingError` names."""
    deadline = time.monotonic() + wait
    while True:
        alive = [_node_label(node) for node in ray.nodes() if node.get("Alive")]
        if expected is None or len(alive) >= expected:
            if expected is not None:
                log.info(f"ray: {len(alive)} of {expected} node(s) joined: {', '.join(sorted(alive))}")
            return len(alive)
        if time.monotonic() >= deadline:
            missing = _missing_slurm_nodes(shard.job.job_id, [a.split(" ")[0] for a in alive])
            raise RayNodesMissingError(
                f"ray: only {len(alive)} of {expected} nodes (CURATOR_RAY_NODES) joined the Ray cluster at "
                f"{address} within {wait:.0f} s (joined: {', '.join(sorted(alive)) or 'none'}"
                + (f"; missing: {', '.join(missing)}" if missing else "")
                + "). The missing node's `ray start` output in this task's log says why (an address it "
                "cannot reach, authentication, a firewall); RayExecutor(node_wait_seconds=...) sets the wait"
            )
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def _node_label(node: dict[str, Any]) -> str:
    """``host (address)`` of a node as ``ray.nodes()`` describes it."""
    host = str(node.get("NodeManagerHostname") or "?")
    return f"{host} ({node.get('NodeManagerAddress', '?')})"


def _missing_slurm_nodes(job_id: str | None, joined_hosts: Sequence[str]) -> list[str]:
    """The nodes of Slurm job ``job_id`` whose name is not among the joined Ray nodes' host names (short
    names compared), to name them in the error; empty when Slurm cannot say (not in a job, no scontrol,
    or node names unlike host names)."""
    if not job_id or shutil.which("scontrol") is None:
        return []
    try:
        job = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=10, check=True
        ).stdout
        nodelist = next((f.split("=", 1)[1] for f in job.split() if f.startswith("NodeList=")), "")
        names = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=10, check=True
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return []
    joined = {h.split(".")[0] for h in joined_hosts}
    missing = [n for n in names if n.split(".")[0] not in joined]
    return missing if len(missing) < len(names) else []


def _match_ray_start_auth() -> None:
    """Use token authentication to join a cluster when ``ray start`` would (a token is available and
    ``RAY_AUTH_MODE`` is unset): Ray >= 2.5x enables it in ``ray start --head`` then, but a driver's
    ``ray.init(address=...)`` does not, and fails with InvalidAuthToken. Ray's own helper, so the rule
    stays Ray's; absent in Ray versions without token authentication."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


__all__ = ["RayNodesMissingError", "Session", "SessionOptions", "connect", "disconnect"]

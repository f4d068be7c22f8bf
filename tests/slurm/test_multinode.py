"""Multi-node runs on a real multi-node Slurm cluster: scripts/slurm-multinode-up.sh's three nodes, each
a network and UTS namespace of this machine with its own hostname and IP (the filesystem and the
process table are shared, which the checks below use to see every node's processes at once)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.helpers import EXAMPLE, clean_env, read_tree, run_example
from support.slurmtools import wait_for_job

pytestmark = [pytest.mark.slurm, pytest.mark.multinode]


def srun(conf: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["srun", *args], env=clean_env({"SLURM_CONF": conf}), capture_output=True, text=True, timeout=timeout
    )


def test_every_node_has_its_own_hostname_and_address(multinode_cluster: str) -> None:
    """What a multi-node program relies on: one task per node, each with a name that resolves to an
    address of its own (not loopback), which the other nodes can reach."""
    code = "import socket; n = socket.gethostname(); print(n, socket.gethostbyname(n))"
    proc = srun(multinode_cluster, "-N", "3", "--ntasks-per-node=1", sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert len(rows) == 3
    assert len({name for name, _ in rows}) == 3 and len({ip for _, ip in rows}) == 3, rows
    assert not any(ipaddress.ip_address(ip).is_loopback for _, ip in rows), rows
    # From the first node, the second node's slurmd answers at the second node's address.
    port = re.search(r"^SlurmdPort=(\d+)", Path(multinode_cluster).read_text(), re.MULTILINE)
    assert port is not None
    target = f"/dev/tcp/{rows[1][1]}/{port.group(1)}"
    reach = srun(multinode_cluster, "-N", "1", "-w", rows[0][0], "bash", "-c", f"exec 3<>{target}", timeout=60)
    assert reach.returncode == 0, f"{rows[0][0]} cannot reach {target}: {reach.stderr}"


def test_srun_ranks_on_two_nodes_split_the_work_between_them(
    multinode_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    """`srun -N 2 -n 2`: each rank (one per node) takes sub-shard SLURM_PROCID; together they write
    exactly what one unsharded run writes, and each rank's records name its own node."""
    reference, out = tmp_path / "reference", tmp_path / "out"
    run_example(corpus, reference, "--workers", "1")
    proc = srun(multinode_cluster, "-N", "2", "-n", "2", "--ntasks-per-node=1", sys.executable, str(EXAMPLE),
                "--input", str(corpus), "--output", str(out), "--workers", "1")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert read_tree(out) == read_tree(reference)
    records = list(iter_records(str(out / DEFAULT_RUN_DIR_NAME)))
    hosts = {shard: {r["host"] for r in records if r["shard"] == shard} for shard in ("0/2", "1/2")}
    assert {r["shard"] for r in records} == set(hosts)
    assert all(len(h) == 1 for h in hosts.values()) and hosts["0/2"] != hosts["1/2"], hosts


# --- Ray over the nodes of an array task (submit --nodes-per-task) -----------------------------------

#: A pipeline whose middle stage sleeps on every source task, so a run can be stopped or hurt midway.
#: The stage is defined in the script: Ray ships it to the actors by value.
SLOW_SCRIPT = """
import os, sys, time
from curator_slurm import CuratorError, LocalExecutor, Pipeline, configure_logging
from curator_slurm.backends.ray import RayExecutor
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage
from curator_slurm.tasks import DocumentBatch


class Slow(ProcessingStage[DocumentBatch, DocumentBatch]):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def params(self) -> dict[str, object]:
        return {}  # how long it sleeps is not part of what the pipeline computes

    def process(self, task: DocumentBatch) -> DocumentBatch:
        time.sleep(self.seconds)
        return task


if __name__ == "__main__":
    configure_logging()
    source, out, seconds, executor = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    if os.environ.get("SLURM_ARRAY_TASK_ID", "0") != "0":
        seconds = 0.0  # only the array's first task is slow
    node_wait = float(sys.argv[5]) if len(sys.argv) > 5 else 300.0
    pipeline = Pipeline("slow").add_stage(JsonlReader(source)).add_stage(Slow(seconds)).add_stage(ParquetWriter(out))
    ray = RayExecutor(retry_backoff=0.1, node_wait_seconds=node_wait)
    try:
        result = pipeline.run(ray if executor == "ray" else LocalExecutor(workers=1))
    except CuratorError as e:
        print(f"slow: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"slow: {result.done} done")
"""

#: How long a test waits for a multi-node array (Ray start-up on a loaded 2-core machine included).
JOB_TIMEOUT = 400


def submit(conf: str, cwd: Path, *args: str) -> str:
    """`curator-slurm submit ARGS` on the multi-node cluster; returns the array's job id."""
    proc = subprocess.run([sys.executable, "-m", "curator_slurm.cli", "submit", *args],
                          env=clean_env({"SLURM_CONF": conf}), cwd=cwd, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (job,) = re.findall(r"(\d+) \(shards", proc.stdout)
    return job


def logs(out: Path) -> str:
    return "".join(p.read_text() for p in sorted((out / DEFAULT_RUN_DIR_NAME / "logs").iterdir()))


def node_namespaces() -> dict[int, str]:
    """Network namespace inode -> node, for the nodes of scripts/slurm-multinode-up.sh."""
    return {os.stat(p).st_ino: p.name.removeprefix("curator-") for p in Path("/run/netns").glob("curator-cnode*")}


def ray_processes_on_nodes(job: str) -> list[str]:
    """``node: pid command`` of every Ray process (raylet, GCS, workers, ``ray start``) of Slurm job
    ``job`` (an array task's own id) in a node's network namespace: all nodes share this machine's
    process table. A process belongs to the job by the ``SLURM_JOB_ID`` it inherited from its step
    (Ray workers retitle themselves ``ray::...``, so their command line does not say)."""
    namespaces, found = node_namespaces(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            node = namespaces.get(os.stat(proc / "ns" / "net").st_ino)
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        is_ray = cmdline.startswith("ray::") or any(m in cmdline for m in ("/ray/", "bin/ray ", "curator-ray-"))
        is_ray = is_ray and Path(cmdline.split(" ")[0]).name not in ("bash", "srun")  # Slurm's, that run Ray
        if node and is_ray and f"SLURM_JOB_ID={job}".encode() in environ:
            found.append(f"{node}: {proc.name} {cmdline[:200]}")
    return found


def ray_leftovers(job: str) -> list[str]:
    """The temporary directories and Ray processes of Slurm job ``job`` left on any node."""
    return [str(p) for p in Path("/tmp").glob(f"curator-ray-{job}-*")] + ray_processes_on_nodes(job)


def wait_until(condition: Callable[[], object], timeout: float, what: str, show: Callable[[], object] = str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not so after {timeout:.0f} s; {show()}")
        time.sleep(0.5)


def task_job_id(array_job: str, task: int) -> str:
    """The job id of array task ``array_job_<task>`` (what SLURM_JOB_ID is inside it)."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", f"{array_job}_{task}", "-o", "%A"],
                         capture_output=True, text=True, timeout=30, check=True).stdout.split()  # fmt: skip
    assert len(out) == 1, out
    return out[0]


def test_an_array_of_two_node_tasks_runs_ray_over_both_nodes(
    multinode_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    """`--nodes-per-task 2 --executor ray`: each task's Ray cluster spans its two nodes (both join, actors
    on both), the outputs are exactly an unsharded local run's, and nothing of Ray is left on any node."""
    reference, out = tmp_path / "reference", tmp_path / "out"
    run_example(corpus, reference, "--workers", "1")
    job = submit(multinode_cluster, tmp_path, str(EXAMPLE), "--shards", "2", "--nodes-per-task", "2",
                 "--cpus-per-task", "1", "--",
                 "--input", str(corpus), "--output", str(out), "--executor", "ray")  # fmt: skip
    assert wait_for_job(job, timeout=JOB_TIMEOUT) == {"0": "COMPLETED", "1": "COMPLETED"}, logs(out)
    assert read_tree(out) == read_tree(reference)
    text = logs(out)
    joined = re.findall(r"ray: 2 of 2 node\(s\) joined: (\S+) \([\d.]+\), (\S+) \([\d.]+\)", text)
    actors = re.findall(r"ray: actors on 2 node\(s\): (\S+) x\d+, (\S+) x\d+", text)
    assert len(joined) == 2 and all(a != b for a, b in joined), text
    assert len(actors) == 2 and all(set(a) <= set(j) for a, j in zip(actors, joined, strict=True)), text
    for record in iter_records(str(out / DEFAULT_RUN_DIR_NAME)):
        assert ray_leftovers(str(record["job_id"])) == []


def test_scancel_of_a_running_two_node_task_leaves_no_ray_on_any_node(
    multinode_cluster: str, corpus: Path, tmp_path: Path
) -> None:
    """scancel while the task's actors run on both nodes: every node's step stops its Ray and removes
    its directory within Slurm's KillWait."""
    script, out = tmp_path / "slow.py", tmp_path / "out"
    script.write_text(SLOW_SCRIPT)
    array = submit(multinode_cluster, tmp_path, str(script), "--shards", "1", "--nodes-per-task", "2",
                   "--cpus-per-task", "1", "--", str(corpus), str(out), "3", "ray")  # fmt: skip
    wait_until(lambda: "ray: actors on 2 node(s)" in logs(out), JOB_TIMEOUT, "the task's actors started on both nodes")
    job = task_job_id(array, 0)
    assert {line.split(":")[0] for line in ray_leftovers(job) if not line.startswith("/")} == {"cnode1", "cnode2"}
    subprocess.run(["scancel", array], check=True, timeout=30)
    assert wait_for_job(array, timeout=120) == {"0": "CANCELLED"}
    # Slurm's KillWait (10 s on this cluster) bounds how long a step may take to stop.
    wait_until(lambda: ray_leftovers(job) == [], 30, f"no Ray process or directory of job {job} on any node",
               lambda: ray_leftovers(job))  # fmt: skip


def test_a_ray_node_killed_mid_run_is_survived(multinode_cluster: str, corpus: Path, tmp_path: Path) -> None:
    """Every Ray process on the second node SIGKILLed while the task runs (as when a node dies): its
    actors' calls are retried on the first node, the task completes with the full output, and the log
    says what happened."""
    script, reference, out = tmp_path / "slow.py", tmp_path / "reference", tmp_path / "out"
    script.write_text(SLOW_SCRIPT)
    local = subprocess.run([sys.executable, str(script), str(corpus), str(reference), "0", "local"],
                           env=clean_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert local.returncode == 0, local.stderr
    array = submit(multinode_cluster, tmp_path, str(script), "--shards", "1", "--nodes-per-task", "2",
                   "--cpus-per-task", "1", "--", str(corpus), str(out), "2", "ray")  # fmt: skip
    wait_until(lambda: "ray: actors on 2 node(s)" in logs(out), JOB_TIMEOUT, "the task's actors started on both nodes")
    job = task_job_id(array, 0)
    head = re.search(r"Ray head on (\S+) at", logs(out))
    assert head is not None
    victims = [line for line in ray_processes_on_nodes(job) if not line.startswith(head.group(1) + ":")]
    assert victims, ray_processes_on_nodes(job)
    for line in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[1]), signal.SIGKILL)
    assert wait_for_job(array, timeout=JOB_TIMEOUT) == {"0": "COMPLETED"}, logs(out)
    assert read_tree(out) == read_tree(reference)
    assert re.search(r"a Ray worker of stages? .*'slow'.* died", logs(out)), logs(out)
    wait_until(lambda: ray_leftovers(job) == [], 30, f"no Ray process or directory of job {job} on any node",
               lambda: ray_leftovers(job))  # fmt: skip


def test_a_node_that_cannot_join_fails_the_task_naming_it(multinode_cluster: str, corpus: Path, tmp_path: Path) -> None:
    """The failure this cluster was built to show: the second node's `ray start` does not get the task's
    token (an --env-setup line wraps srun to drop it, as the script did before it exported one), so it
    cannot join. The pipeline waits its node_wait_seconds (20 here), then fails naming the node, and
    nothing of Ray is left on either node."""
    script, out = tmp_path / "slow.py", tmp_path / "out"
    script.write_text(SLOW_SCRIPT)
    drop_token = (
        'srun() { if [[ " $* " == *" --address="* ]]; then env -u RAY_AUTH_MODE -u RAY_AUTH_TOKEN srun "$@"; '
        'else command srun "$@"; fi; }'
    )
    array = submit(multinode_cluster, tmp_path, str(script), "--shards", "1", "--nodes-per-task", "2",
                   "--cpus-per-task", "1", "--env-setup", drop_token, "--",
                   str(corpus), str(out), "0", "ray", "20")  # fmt: skip
    assert wait_for_job(array, timeout=JOB_TIMEOUT) == {"0": "FAILED"}, logs(out)
    text = logs(out)
    head = re.search(r"Ray head on (\S+) at", text)
    assert head is not None, text
    (other,) = {"cnode1", "cnode2"} - {head.group(1)}
    assert re.search(
        rf"slow: RayNodesMissingError: ray: only 1 of 2 nodes \(CURATOR_RAY_NODES\) joined the Ray cluster at "
        rf"\S+ within 20 s \(joined: {head.group(1)} \([\d.]+\); missing: {other}\)",
        text,
    ), text
    job = task_job_id(array, 0)
    wait_until(lambda: ray_leftovers(job) == [], 30, f"no Ray process or directory of job {job} on any node",
               lambda: ray_leftovers(job))  # fmt: skip


def test_a_task_that_ends_first_stops_only_its_own_ray(multinode_cluster: str, corpus: Path, tmp_path: Path) -> None:
    """Two tasks of one array share both nodes; the last one (whose job id is the array's) has nothing
    slow to do and ends while the first still works. Ending its Ray must not touch the first task's
    (`scancel $SLURM_JOB_ID` there would signal every task of the array): both complete."""
    script, reference, out = tmp_path / "slow.py", tmp_path / "reference", tmp_path / "out"
    script.write_text(SLOW_SCRIPT)
    local = subprocess.run([sys.executable, str(script), str(corpus), str(reference), "0", "local"],
                           env=clean_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert local.returncode == 0, local.stderr
    array = submit(multinode_cluster, tmp_path, str(script), "--shards", "2", "--nodes-per-task", "2",
                   "--cpus-per-task", "1", "--", str(corpus), str(out), "3", "ray")  # fmt: skip
    assert wait_for_job(array, timeout=JOB_TIMEOUT) == {"0": "COMPLETED", "1": "COMPLETED"}, logs(out)
    assert read_tree(out) == read_tree(reference)
    assert logs(out).count("ray: actors on 2 node(s)") == 2

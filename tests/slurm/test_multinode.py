"""Multi-node runs on a real multi-node Slurm cluster: scripts/slurm-multinode-up.sh's three nodes, each
a network and UTS namespace of this machine with its own hostname and IP (the filesystem and the
process table are shared, which the checks below use to see every node's processes at once)."""

from __future__ import annotations

import ipaddress
import re
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.slurm.ledger import DEFAULT_RUN_DIR_NAME, iter_records
from helpers import EXAMPLE, clean_env, read_tree, run_example

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

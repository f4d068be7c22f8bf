"""Takeover end to end: a 4-shard array of real processes whose shard 0 has tasks ten times heavier (the tally
pipeline's --skew). The other shards take over its unstarted tasks; whatever is killed where (a taker or the owner,
after its claim, mid-task, after its outputs but before its ledger commit), the outputs equal an unsharded run's and
the ledger holds exactly one done record per source task."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from curator_slurm.fs.publish import TMP_MARK
from curator_slurm.runs.layout import TAKEOVER_DIR
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.runs.sharding import shard_of
from curator_slurm.samples.corpus import make_corpus
from support.helpers import REPO, assert_same_parquet, clean_env, read_tree
from support.tallying import tally_cmd

CLI = [sys.executable, "-m", "curator_slurm.cli"]
LIGHT, HEAVY = 0.05, 1.5


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 small JSONL files; the tasks of shard 0 of 4 (hash) are the heavy ones under --skew."""
    root = tmp_path_factory.mktemp("skewed")
    make_corpus(str(root), files=24, docs_per_file=30, seed=3)
    return root


@pytest.fixture(scope="module")
def reference(skewed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("reference")
    cmd = tally_cmd(skewed, out, out.parent / "ref-tally", "--skew", "0", "0", "4")
    subprocess.run(cmd, check=True, env=clean_env(), capture_output=True, timeout=300)
    return read_tree(out)


def done_records(out: Path) -> list[dict]:
    return [r for r in iter_records(str(out / DEFAULT_RUN_DIR_NAME)) if r["status"] == "done"]


def status_json(out: Path) -> dict:
    proc = subprocess.run(
        [*CLI, "status", str(out / DEFAULT_RUN_DIR_NAME), "--json"], capture_output=True, text=True, env=clean_env()
    )
    return json.loads(proc.stdout)


def test_local_array_helps_the_heavy_shard(skewed: Path, reference: dict[str, bytes], tmp_path: Path) -> None:
    out, logs = tmp_path / "out", tmp_path / "logs"
    proc = subprocess.run(
        [*CLI, "local", str(REPO / "tests/pipelines/tally.py"), "--shards", "4", "--parallel", "4",
         "--strategy", "hash", "--logs", str(logs), "--", "--input", str(skewed), "--output", str(out),
         "--tally", str(tmp_path / "tally"), "--skew", str(LIGHT), str(HEAVY), "4"],
        capture_output=True, text=True, env=clean_env(), timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_tree(out) == reference
    done = done_records(out)
    assert Counter(r["source"] for r in done) == Counter({s: 1 for s in {r["source"] for r in done}})
    assert len(done) == 24
    heavy = [r for r in done if shard_of(r["source"], 4) == 0]
    by_owner = [r for r in heavy if "taken_from" not in r]
    assert all(r["shard"] == "0/4" for r in by_owner)
    assert {r["taken_from"] for r in heavy if "taken_from" in r} == {"0/4"}
    assert len(by_owner) <= len(heavy) / 2, f"the heavy shard did {len(by_owner)} of its {len(heavy)} tasks itself"
    claims = [p for p in (out / DEFAULT_RUN_DIR_NAME / TAKEOVER_DIR).rglob("*") if p.is_file()]
    assert claims == [], "every shard done: no claim file is left"
    taken = Counter(r["taken_from"] for r in done if "taken_from" in r)  # a light shard that started late: too
    status = status_json(out)
    assert status["takeover"]["tasks"] == sum(taken.values())
    assert status["takeover"]["from"] == dict(taken)
    assert sum(s["taken"] for s in status["shards"]) == sum(taken.values())
    text = subprocess.run([*CLI, "status", str(out / DEFAULT_RUN_DIR_NAME)], capture_output=True, text=True).stdout
    assert f"takeover: {sum(taken.values())} of 24 done source tasks were done by a shard other" in text
    summary = (logs / "shard-0.log").read_text()
    assert f"{len(heavy) - len(by_owner)} left to other processes" in summary


def test_no_steal_leaves_every_shard_its_own(skewed: Path, reference: dict[str, bytes], tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [*CLI, "local", str(REPO / "tests/pipelines/tally.py"), "--shards", "4", "--parallel", "4",
         "--strategy", "hash", "--no-steal", "--logs", str(tmp_path / "logs"), "--", "--input", str(skewed),
         "--output", str(out), "--tally", str(tmp_path / "tally"), "--skew", "0", "0.3", "4"],
        capture_output=True, text=True, env=clean_env(), timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_tree(out) == reference
    done = done_records(out)
    assert len(done) == 24 and not [r for r in done if "taken_from" in r]
    assert all(r["shard"] == f"{shard_of(r['source'], 4)}/4" for r in done)
    assert not (out / DEFAULT_RUN_DIR_NAME / TAKEOVER_DIR).exists()


# --- kills ---------------------------------------------------------------------------------------------


def start_shards(skewed: Path, out: Path, tmp_path: Path, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    """The 4 shards of the skewed array, each its own process (listing the input: no manifest)."""
    procs = []
    for i in range(4):
        cmd = tally_cmd(skewed, out, tmp_path / "tally", "--skew", str(LIGHT), str(HEAVY), "4",
                        "--started", str(tmp_path / "started"))  # fmt: skip
        shard_env = {"CURATOR_NUM_SHARDS": "4", "CURATOR_SHARD_INDEX": str(i), **env}
        with open(tmp_path / f"shard-{i}.log", "w") as log:
            procs.append(subprocess.Popen(cmd, env=clean_env(shard_env), stdout=log, stderr=subprocess.STDOUT))
    return procs


def started(tmp_path: Path) -> list[tuple[int, str]]:
    path = tmp_path / "started"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(int(pid), source) for pid, source in (line.split() for line in lines)]


def claims_of(out: Path, pid: int) -> list[str]:
    directory = out / DEFAULT_RUN_DIR_NAME / TAKEOVER_DIR / "h4" / "0"
    found = []
    for name in os.listdir(directory) if directory.exists() else []:
        if not name.startswith("."):
            try:
                holder = json.loads((directory / name).read_text())
            except (OSError, ValueError):
                continue
            if holder["pid"] == pid:
                found.append(name)
    return found


def wait_for(what: str, check: object, procs: list[subprocess.Popen[bytes]], timeout: float = 180) -> object:
    deadline = time.monotonic() + timeout
    while not (found := check()):  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never saw {what}"
        assert any(p.poll() is None for p in procs), f"every shard ended before {what}"
        time.sleep(0.01)
    return found


@pytest.mark.parametrize(
    "kill",
    [
        "owner mid-task",
        "taker after its claim",
        "taker mid-task",
        "taker after its outputs, before its ledger commit",
    ],
)
def test_killed_anywhere_every_task_done_once(
    skewed: Path, reference: dict[str, bytes], tmp_path: Path, kill: str
) -> None:
    out = tmp_path / "out"
    # Records of the processes are committed only as they end: a kill loses every record not yet committed.
    env = {"CURATOR_LEDGER_WINDOW_SECONDS": "3600"} if "ledger" in kill else {}
    procs = start_shards(skewed, out, tmp_path, env)
    pids = [p.pid for p in procs]
    try:
        if kill == "owner mid-task":
            victim = procs[0]
            wait_for("the owner's first task", lambda: [s for pid, s in started(tmp_path) if pid == pids[0]], procs)
        else:

            def taking() -> list[int]:  # the processes of other shards that started a task of shard 0
                return [pid for pid, s in started(tmp_path) if pid != pids[0] and shard_of(s, 4) == 0]

            if kill == "taker after its claim":
                found = wait_for("a taker's claim", lambda: [p for p in pids[1:] if claims_of(out, p)], procs)
            elif kill == "taker mid-task":
                found = wait_for("a taker at work on shard 0", taking, procs)
            else:

                def written() -> list[int]:
                    return [pid for pid, s in started(tmp_path) if pid in taking() and (out / f"{s}.parquet").exists()]

                found = wait_for("a taken task's output", written, procs)
            victim = procs[pids.index(found[0])]  # type: ignore[index]
        victim.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait(300)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert victim.returncode == -signal.SIGKILL
    others = [p for p in procs if p is not victim]
    logs = "".join((tmp_path / f"shard-{i}.log").read_text() for i in range(4))
    assert [p.returncode for p in others] == [0] * 3, logs
    dead = f"{TMP_MARK}{victim.pid}-"
    tree = {k: v for k, v in read_tree(out).items() if dead not in k}  # what the killed writer left half-written
    assert tree == reference
    done = Counter(r["source"] for r in done_records(out))
    assert len(done) == 24 and set(done.values()) == {1}, "every source task recorded done exactly once"
    assert [r for r in done_records(out) if "taken_from" in r], "some work was taken over"


def test_every_phase_of_a_workflow_takes_over_within_the_phase(tmp_path: Path) -> None:
    """Exact dedup with shard 0 slow in every phase (the hash and write phases from a manifest, the find phase
    listing its buckets): in each phase other shards take over shard 0's tasks, recorded in that phase's run
    directory; the result is the unsharded run's."""
    data = tmp_path / "in"
    make_corpus(str(data), files=16, docs_per_file=20, seed=4)
    script = str(REPO / "tests" / "pipelines" / "skewed_dedup.py")
    reference = tmp_path / "reference"
    subprocess.run([sys.executable, script, "--input", str(data), "--output", str(reference), "--skew", "0", "0"],
                   check=True, env=clean_env(), capture_output=True, timeout=300)  # fmt: skip
    out = tmp_path / "out"
    proc = subprocess.run(
        [*CLI, "local", script, "--shards", "4", "--parallel", "4", "--strategy", "hash", "--logs",
         str(tmp_path / "logs"), "--", "--input", str(data), "--output", str(out), "--skew", str(LIGHT), "1.0"],
        capture_output=True, text=True, env=clean_env(), timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_same_parquet(out, reference)
    for phase in ("hash", "find", "write"):
        run_dir = out / ".curator-work" / DEFAULT_RUN_DIR_NAME / phase
        done = [r for r in iter_records(str(run_dir)) if r["status"] == "done"]
        assert set(Counter(r["source"] for r in done).values()) == {1}, phase
        assert "0/4" in {r["taken_from"] for r in done if "taken_from" in r}, f"phase {phase}: shard 0 not helped"

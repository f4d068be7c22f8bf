"""Takeover claims (runs/claims.py): one creator per claim among racing processes, a new generation only over a
dead holder, and the liveness answers a claim's holder gets on this host and from another one."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curator_slurm.runs.claims import (
    STALE_BEATS,
    Claim,
    ClaimBoard,
    Holder,
    holder_alive,
    holding,
    process_alive,
)
from curator_slurm.runs.layout import TAKEOVER_DIR
from curator_slurm.runs.liveness import LIVE_DIR, marked
from curator_slurm.shard import JobInfo, ShardSpec


def me(index: int = 0, count: int = 4, **job: object) -> Holder:
    return Holder.of(dataclasses.replace(ShardSpec.explicit(index, count), job=JobInfo(**job)))  # type: ignore[arg-type]


def _claim_everything(run_dir: str, groups: int, seed: int, barrier: object, out: str) -> None:
    """A racing process: claim every group of shard 0 in a random order, write down the ones it got, and stay
    alive until every racer is done (so no claim is taken over from a racer that has ended)."""
    holder = Holder.of(ShardSpec.explicit(1, 4))
    board = ClaimBoard(run_dir, "h4", holder)
    order = list(range(groups))
    random.Random(seed).shuffle(order)
    with holding(holder):
        got = [c for g in order if (c := board.claim(0, g)) is not None]
        with open(out, "w") as f:
            f.write("".join(f"{c.group} {c.generation}\n" for c in got))
        barrier.wait()  # type: ignore[attr-defined]


@pytest.mark.parametrize("racers", [2, 8])
def test_racing_processes_create_each_claim_once(tmp_path: Path, racers: int) -> None:
    groups = 64
    board = ClaimBoard(str(tmp_path), "h4", me(0))
    board.register(0)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(racers)
    outs = [tmp_path / f"racer-{i}" for i in range(racers)]
    procs = [
        ctx.Process(target=_claim_everything, args=(str(tmp_path), groups, i, barrier, str(outs[i])))
        for i in range(racers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    won = [line.split() for out in outs for line in out.read_text().splitlines()]
    assert sorted(int(g) for g, _ in won) == list(range(groups)), "every group claimed, none twice"
    assert {gen for _, gen in won} == {"0"}, "no claim of a live holder taken over"
    assert sorted(os.listdir(board.shard_dir(0))) == sorted(f"{g}-0" for g in range(groups)), "no temporary left"


def _take_over(run_dir: str, barrier: object, out: str) -> None:
    holder = Holder.of(ShardSpec.explicit(2, 4))
    board = ClaimBoard(run_dir, "h4", holder)
    with holding(holder):
        barrier.wait()  # type: ignore[attr-defined]
        claim = board.claim(0, 5)
        Path(out).write_text("" if claim is None else str(claim.generation))
        barrier.wait()  # type: ignore[attr-defined]


def test_takers_racing_for_a_dead_holders_group_one_wins(tmp_path: Path) -> None:
    """A group held by a process that died: of many takers at once, exactly one creates the next generation."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    gone = dataclasses.replace(me(0), pid=int(dead.stdout), start="1")
    ClaimBoard(str(tmp_path), "h4", gone).register(0)
    assert ClaimBoard(str(tmp_path), "h4", gone).create(Claim(0, 5, 0))
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(6)
    outs = [tmp_path / f"taker-{i}" for i in range(6)]
    procs = [ctx.Process(target=_take_over, args=(str(tmp_path), barrier, str(out))) for out in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert sorted(out.read_text() for out in outs) == [""] * 5 + ["1"]


def test_a_live_holder_keeps_its_claim_and_a_dead_one_loses_it(tmp_path: Path) -> None:
    owner, taker = me(0), me(1)
    with holding(owner):
        ClaimBoard(str(tmp_path), "h4", owner).register(0)
        assert ClaimBoard(str(tmp_path), "h4", owner).claim(0, 0) == Claim(0, 0, 0)
        board = ClaimBoard(str(tmp_path), "h4", taker)
        with holding(taker):
            assert board.claim(0, 0) is None, "its holder is alive"
    with holding(taker):  # the owner's run has ended (this process lives on: its nonce is no longer active)
        assert board.claim(0, 0, worth_taking=lambda: False) is None, "nothing left to do in it: not taken"
        assert board.claim(0, 0) == Claim(0, 0, 1)
        assert ClaimBoard(str(tmp_path), "h4", owner).superseded(Claim(0, 0, 0))
        assert not board.superseded(Claim(0, 0, 1))
        assert board.holder(Claim(0, 0, 1)) == taker


def test_open_shards_are_started_and_not_finished(tmp_path: Path) -> None:
    board = ClaimBoard(str(tmp_path), "h4", me(0))
    assert board.open_shards() == []
    for s in (0, 2, 3):
        board.register(s)
    board.finish(2)
    assert board.open_shards() == [0, 3]
    assert (tmp_path / TAKEOVER_DIR / "h4" / "2.end").exists()
    board.register(2)  # a re-run of shard 2's owner: it may have work left
    assert board.open_shards() == [0, 2, 3]


def test_a_damaged_claim_counts_as_a_dead_holders(tmp_path: Path) -> None:
    board = ClaimBoard(str(tmp_path), "h4", me(1))
    board.register(0)
    Path(board.shard_dir(0), "3-0").write_bytes(b"\x00garbage")
    with holding(board.me):
        assert board.claim(0, 3) == Claim(0, 3, 1)


# --- who is alive ---------------------------------------------------------------------------------------


def test_this_host_pid_and_start_time(tmp_path: Path) -> None:
    mine = me(0)
    assert holder_alive(str(tmp_path), mine, me(1)) is False, "a run of this process that is not holding"
    with holding(mine):
        assert holder_alive(str(tmp_path), mine, me(1)) is True
    parent = os.getppid()
    assert process_alive(parent, None)
    assert not process_alive(parent, "0"), "a pid reused by a process that started at another time"
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not process_alive(int(ended.stdout), None)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)  # ended, not reaped yet: it does no work
    assert not process_alive(zombie.pid, None)
    zombie.wait()


def test_another_host(tmp_path: Path) -> None:
    run = str(tmp_path)
    mine = me(0, job_id="77", restart_count=2)
    other = dataclasses.replace(me(1), host="elsewhere", pid=4242, job=None)
    assert holder_alive(run, other, mine), "no heartbeat: cannot be told from here, so alive"
    assert not holder_alive(run, dataclasses.replace(other, job="77", restart=1), mine), "an earlier run of my job"
    assert holder_alive(run, dataclasses.replace(other, job="77", restart=2), mine), "a peer rank of my job's run"
    beating = dataclasses.replace(other, beat=10.0)
    assert not holder_alive(run, beating, mine), "its marker is gone: it ended"
    live = tmp_path / LIVE_DIR
    live.mkdir()
    (live / mine.marker).write_text("{}")
    marker = live / beating.marker
    marker.write_text("{}")
    assert holder_alive(run, beating, mine)
    now = os.stat(marker).st_mtime
    os.utime(marker, (now - STALE_BEATS * 10.0 - 5, now - STALE_BEATS * 10.0 - 5))
    assert not holder_alive(run, beating, mine), "no heartbeat for more than 6 beats"


def test_the_heartbeat_touches_the_marker_and_ends_with_the_process(tmp_path: Path) -> None:
    with marked(str(tmp_path), "test", beat=0.2) as beat:
        assert beat == 0.2
        marker = tmp_path / LIVE_DIR / me().marker
        first = marker.stat().st_mtime_ns
        deadline = time.monotonic() + 30
        while marker.stat().st_mtime_ns == first:
            assert time.monotonic() < deadline, "the heartbeat never touched the marker"
            time.sleep(0.05)
    assert not marker.exists()
    code = (
        "import sys, time; from curator_slurm.runs.liveness import marked\n"
        "with marked(sys.argv[1], 'killed', beat=0.2):\n    print('in', flush=True); time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "in\n"
    beats = _children(proc.pid)
    assert len(beats) == 1, "one heartbeat process"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while process_alive(beats[0], None):
        assert time.monotonic() < deadline, "the heartbeat outlived its process"
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def test_a_taker_waits_for_the_verdict_on_a_late_holder_of_another_host(tmp_path: Path) -> None:
    """The only group left is held on another host by a process whose heartbeat is late: a taker waits until it is
    stale (dead), then takes it over; told to stop, it waits no longer."""
    from curator_slurm.runs.takeover import ShardLists, Takeover
    from curator_slurm.tasks import Task

    run = str(tmp_path)
    tasks = [Task(task_id=f"t{i}") for i in range(8)]
    lists = ShardLists(ShardSpec.explicit(1, 2), tasks)
    owned = len(lists.tasks(0))
    far = dataclasses.replace(me(0, 2), host="elsewhere", pid=4242, beat=0.3)
    board = ClaimBoard(run, "h2", far)
    board.register(0)
    for group in range(owned):  # every group of shard 0 claimed by the far process
        assert board.create(Claim(0, group, 0))
    live = tmp_path / LIVE_DIR
    live.mkdir()
    marker = live / far.marker
    marker.write_text("{}")
    mine = me(1, 2)
    (live / mine.marker).write_text("{}")
    late = os.stat(marker).st_mtime - 3 * 0.3  # three beats missed: late, not yet dead (6)
    os.utime(marker, (late, late))
    taker = ClaimBoard(run, "h2", mine)
    assert taker.alive(far) and taker.late(far)
    mine_done = {t.task_id for t in lists.tasks(1)}  # this shard's own tasks are done: only shard 0's are left
    with holding(mine):
        stopped = Takeover(run, taker, lists, mine_done, stop=lambda: True)
        assert stopped.steal() is None, "a stop signal ends the wait"
        started = time.monotonic()
        work = Takeover(run, taker, lists, mine_done).steal()
        assert work is not None and work.shard == 0 and work.claim.generation == 1
        assert time.monotonic() - started >= 0.5, "it waited for the heartbeat to go stale"


def test_a_retired_shard_leaves_no_claim_and_takes_none_until_its_owner_registers_again(tmp_path: Path) -> None:
    """Once its tasks are all done, a shard's claims hold nothing: they go, with its directory and .end, so
    a finished array leaves none; a taker's claim on it then fails (nothing to do); an owner's re-run (its
    outputs lost, say) claims afresh."""
    owner = me(0)
    board = ClaimBoard(str(tmp_path), "h4", owner)
    for s in (0, 1):
        board.register(s)
    with holding(owner):
        assert [board.claim(0, g) for g in range(3)] == [Claim(0, g, 0) for g in range(3)]
        board.finish(0)
        board.retire(0)
        assert not (tmp_path / TAKEOVER_DIR / "h4" / "0").exists()
        assert sorted(os.listdir(tmp_path / TAKEOVER_DIR / "h4")) == ["1"]
        assert board.open_shards() == [1]
        assert ClaimBoard(str(tmp_path), "h4", me(1)).claim(0, 0) is None
        board.register(0)
        assert board.claim(0, 0) == Claim(0, 0, 0)


def test_a_claim_being_made_keeps_a_retired_shards_directory_marked_finished(tmp_path: Path) -> None:
    board = ClaimBoard(str(tmp_path), "h4", me(0))
    board.register(0)
    (tmp_path / TAKEOVER_DIR / "h4" / "0" / ".0-0.tmp-1-abcd").write_text("a taker's, half made")
    board.retire(0)
    assert board.open_shards() == []
    assert (tmp_path / TAKEOVER_DIR / "h4" / "0.end").exists()

"""Takeover: a process that finished its own shard does unstarted source tasks of other shards, each group of
tasks claimed by one process only (:mod:`curator_slurm.runs.claims`): the groups of a shard, every shard's tasks
as their owner has them, and the search for a group to take."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import xxhash

from curator_slurm.runs.claims import HEARTBEAT_SECONDS, STALE_BEATS, Claim, ClaimBoard, Holder
from curator_slurm.runs.ledger import load_status, shard_layout
from curator_slurm.runs.sharding import balanced_assignment, hash_assignment
from curator_slurm.shard import ShardSpec
from curator_slurm.tasks import Task

#: A shard's source tasks are claimed in at most this many groups (one claim file each), so a shard of a
#: million tasks makes as few files as one of sixteen; a straggler can be shared by up to this many processes.
GROUPS_PER_SHARD = 16
#: A taker looking for work reads the claims of at most this many shards (chosen at random among the open
#: ones), so a search costs a bounded number of directory listings however large the array.
SEARCH_WIDTH = 32


def group_bounds(n: int) -> list[range]:
    """The groups of a shard of ``n`` source tasks (positions in :func:`canonical` order): ``min(n, 16)``
    ranges of sizes differing by one at most."""
    k = min(n, GROUPS_PER_SHARD)
    return [range(i * n // k, (i + 1) * n // k) for i in range(k)]


def canonical(tasks: Sequence[Task]) -> list[Task]:
    """A shard's tasks in the order its groups are cut from: heaviest first, then by id; the same in every
    process whatever order it listed them in."""
    return sorted(tasks, key=lambda t: (-t.weight, t.task_id))


def claim_namespace(shard: ShardSpec) -> str:
    """The claims namespace of ``shard``'s array: its ledger layout (count, strategy, manifest), and the
    frozen list of source tasks it splits when there is one (a retry's), so that processes that cut groups
    from different lists never share claims."""
    name = shard_layout(shard)
    if shard.source_list:
        name += "-l" + xxhash.xxh64_hexdigest(shard.source_list.encode("utf-8"))
    return name


class ShardLists:
    """Every shard's source tasks, as their owner has them: computed from the tasks all shards split
    (``shared``), or read from the shard's file of the manifest ``manifest`` (read only when needed).

    Args:
        shard: this process's shard (the count, strategy and manifest of the array).
        shared: every source task that the shards split, when this process listed them.
        manifest: the manifest the array was planned in (a ``ManifestInfo``), when it was.
    """

    def __init__(
        self, shard: ShardSpec, shared: Sequence[Task] | None, manifest: Any = None, own: Sequence[Task] | None = None
    ) -> None:
        self.shard, self.shared, self.manifest = shard, shared, manifest
        self._by_shard: dict[int, list[Task]] | None = None
        self._loaded: dict[int, list[Task]] = {} if own is None else {shard.index: canonical(own)}

    def spec(self, index: int) -> ShardSpec:
        """The shard ``index`` of this process's array."""
        return dataclasses.replace(self.shard, index=index)

    def _assigned(self) -> dict[int, list[Task]]:
        if self._by_shard is None:
            tasks = list(self.shared or ())
            ids = [t.task_id for t in tasks]
            n = self.shard.count
            if self.shard.strategy == "balanced":
                owners = balanced_assignment(ids, [t.weight for t in tasks], n)
            else:
                owners = hash_assignment(ids, n)
            self._by_shard = {}
            for task, owner in zip(tasks, owners, strict=True):
                self._by_shard.setdefault(owner, []).append(task)
        return self._by_shard

    def count(self, index: int) -> int:
        """How many source tasks shard ``index`` owns."""
        if self.manifest is None:
            return len(self._assigned().get(index, ()))
        split = self.shard.count // self.manifest.shards
        tasks_of_file = self.manifest.loads[index // split][0]
        return len(range(index % split, tasks_of_file, split))

    def tasks(self, index: int) -> list[Task]:
        """Shard ``index``'s source tasks, in :func:`canonical` order."""
        if index not in self._loaded:
            if self.manifest is None:
                found: list[Task] = list(self._assigned().get(index, ()))
            else:
                from curator_slurm.runs.manifest import load_shard

                found = list(load_shard(self.manifest.path, self.spec(index))[0])
                for t in found:
                    t.source_id = t.task_id  # as the adapter marks the source stage's outputs
            self._loaded[index] = canonical(found)
        return self._loaded[index]


@dataclass(frozen=True)
class Work:
    """A group of source tasks this process holds the claim of: shard ``shard``'s (its owner's index), those
    of its tasks that are not done yet."""

    shard: int
    claim: Claim
    tasks: list[Task]
    #: What each task reads now, for its done record (``runs.inputs.input_states``); only for other shards' tasks.
    inputs: dict[str, Any] = field(default_factory=dict)


class Takeover:
    """One process's share of the work under takeover: its own groups first, claimed one at a time as it
    reaches them (:meth:`own_work`), then groups of other shards that no live process holds (:meth:`steal`).

    Args:
        run_dir: the run directory (for the ledger: which tasks are done).
        board: the claims of the array.
        lists: every shard's tasks.
        done: the ids of this shard's tasks that the ledger recorded done when the run started.
        stop: whether to give up waiting for a verdict on a holder (a stop signal came).
    """

    def __init__(
        self, run_dir: str, board: ClaimBoard, lists: ShardLists, done: set[str], stop: Callable[[], bool] = bool
    ) -> None:
        self.run_dir, self.board, self.lists, self.stop = run_dir, board, lists, stop
        self.me = lists.shard.index
        self.done_before = set(done)  # this shard's, when the run started: what its own pass skips
        self.done: dict[int, set[str]] = {self.me: set(done)}  # each shard's, as last read
        self.complete: set[tuple[int, int]] = set()  # (shard, group) known to have every task done
        self.random = random.Random()
        #: Tasks of this shard that another process did or held when this one reached their group.
        self.left_to_others = 0
        #: Tasks of this shard left to do in the groups this one has not reached yet.
        self.own_left = sum(1 for t in lists.tasks(self.me) if t.task_id not in self.done_before)
        board.register(self.me)

    # --- the ledger ----------------------------------------------------------------------------------
    def _undone(self, shard: int, group: int, fresh: bool) -> list[Task]:
        """The tasks of ``group`` of ``shard`` that the ledger does not record done (read again if ``fresh``)."""
        tasks = self.lists.tasks(shard)
        members = [tasks[i] for i in group_bounds(len(tasks))[group]]
        if fresh or shard not in self.done:
            ids = [t.task_id for t in tasks]
            self.done[shard] = load_status(self.run_dir, self.lists.spec(shard), ids).done
        undone = [t for t in members if t.task_id not in self.done[shard]]
        if not undone:
            self.complete.add((shard, group))
        return undone

    # --- this shard --------------------------------------------------------------------------------------
    def _any_undone(self, shard: int, group: int) -> bool:
        """Whether a task of ``group`` of ``shard`` is not done, as the ledger says now."""
        return bool(self._undone(shard, group, fresh=True))

    def own_work(self) -> Iterator[Work]:
        """This shard's groups with tasks to do, each claimed as the caller reaches it; a group that a live
        process holds (a taker, already) is left to it."""
        tasks = self.lists.tasks(self.me)
        for group, bounds in enumerate(group_bounds(len(tasks))):
            todo = [tasks[i] for i in bounds if tasks[i].task_id not in self.done_before]
            self.own_left -= len(todo)
            if not todo:
                continue  # done before this run: no claim needed (a taker finds it done too)
            claim = self.board.claim(self.me, group, partial(self._any_undone, self.me, group))
            if claim is None:  # a live process holds it, or one that died did all of it
                self.left_to_others += len(todo)
                continue
            if claim.generation > 0:  # its holder died: what it did is in the ledger
                before = len(todo)
                todo = self._undone(self.me, group, fresh=True)
                self.left_to_others += before - len(todo)
            if todo:
                yield Work(self.me, claim, todo)

    # --- other shards ------------------------------------------------------------------------------------
    def steal(self) -> Work | None:
        """A group of another shard to do, claimed: the last unclaimed group of the open shard (its owner has
        started, and not finished) with the most unclaimed groups, else a group whose holder died with tasks
        not done; None when there is none. When the only candidates are groups whose holder, on another host,
        missed heartbeats, it waits (until ``stop()``) to learn whether that holder lives or is dead."""
        deadline = None
        while True:
            work, suspects = self._search()
            if work is not None or not suspects or self.stop():
                return work
            beat = min(h.beat or HEARTBEAT_SECONDS for h in suspects)
            deadline = deadline or time.monotonic() + (STALE_BEATS + 1) * beat
            if time.monotonic() >= deadline:
                return None
            time.sleep(1.0)

    def _search(self) -> tuple[Work | None, list[Holder]]:
        """One look for work (see :meth:`steal`), and the live holders whose heartbeat is late."""
        open_shards = self.board.open_shards()
        if len(open_shards) > SEARCH_WIDTH:
            open_shards = self.random.sample(open_shards, SEARCH_WIDTH)
        claimed = {s: self.board.generations(s) for s in open_shards}
        unclaimed = {
            s: [g for g in range(len(group_bounds(self.lists.count(s)))) if g not in claimed[s]] for s in open_shards
        }
        order = sorted(open_shards, key=lambda s: (-len(unclaimed[s]), self.random.random()))
        for shard in order:
            for group in reversed(unclaimed[shard]):
                work = self._take(shard, group)
                if work is not None:
                    return work, []
        suspects = []
        for shard in order:  # every group is claimed: those whose holder died
            for group, generation in sorted(claimed[shard].items()):
                if (shard, group) in self.complete:
                    continue
                try:
                    holder = self.board.holder(Claim(shard, group, generation))
                except OSError:
                    continue
                if not self.board.alive(holder):
                    work = self._take(shard, group)
                    if work is not None:
                        return work, []
                elif holder is not None and self.board.late(holder):
                    suspects.append(holder)
            if all((shard, g) in self.complete for g in range(len(group_bounds(self.lists.count(shard))))):
                self.board.finish(shard)  # its owner died after its last group: nothing left here for anyone
        return None, suspects

    def _take(self, shard: int, group: int) -> Work | None:
        """Claim ``group`` of ``shard`` if it has tasks not done, and return them."""
        if (shard, group) in self.complete or not self._undone(shard, group, fresh=False):
            return None
        claim = self.board.claim(shard, group, lambda: bool(self._undone(shard, group, fresh=True)))
        if claim is None:
            return None
        todo = self._undone(shard, group, fresh=True)  # read after the claim: nothing can be done since
        if not todo:
            return None
        from curator_slurm.runs.inputs import input_states

        return Work(shard, claim, todo, input_states(todo))

    def finish(self) -> None:
        """This process did every group of its own that it held: takers need not look at its shard again. When
        the ledger records every task of the shard done, its claims are removed (:meth:`ClaimBoard.retire`)."""
        tasks = self.lists.tasks(self.me)
        done = load_status(self.run_dir, self.lists.spec(self.me), [t.task_id for t in tasks]).done
        if all(t.task_id in done for t in tasks):
            self.board.retire(self.me)
        else:
            self.board.finish(self.me)


def takeover_of(session: Any, beat: float | None) -> Takeover | None:
    """The takeover of a run session (``runs.session.RunSession``) that holds claims with heartbeat ``beat``,
    or None when it takes no part: takeover is off (``CURATOR_STEAL=0``), there is no run directory or no
    other shard, or the shards may not split one list of tasks (new inputs accepted without a manifest: each
    process's own listing counts, so two could cut different groups)."""
    from curator_slurm.runs.claims import ClaimBoard, Holder

    shard, listing, options, run_dir = session.shard, session.listing, session.options, session.run_dir
    if run_dir is None or not options.steal or not shard.enabled or shard.count < 2:
        return None
    if listing.manifest is None and (listing.shared is None or options.accept_new_inputs):
        if options.accept_new_inputs:
            session.log.info(f"{shard.label}: no takeover: with new inputs accepted, shards may list other tasks")
        return None
    board = ClaimBoard(run_dir.path, claim_namespace(shard), Holder.of(shard, beat))
    lists = ShardLists(shard, listing.shared, listing.manifest, own=listing.kept)
    return Takeover(run_dir.path, board, lists, session.done, session.should_stop)


__all__ = ["GROUPS_PER_SHARD", "SEARCH_WIDTH", "ShardLists", "Takeover", "Work", "canonical", "claim_namespace",
           "group_bounds", "takeover_of"]  # fmt: skip

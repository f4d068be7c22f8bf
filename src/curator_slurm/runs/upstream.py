"""What a phase reads of an earlier phase: the outputs that phase's ledger records, checked, never a listing."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import xxhash

from curator_slurm import fs
from curator_slurm.errors import RunDirError
from curator_slurm.runs.inputs import changed_files, done_records, file_states
from curator_slurm.runs.layout import LEDGER_DIR, UPSTREAMS_FILE
from curator_slurm.runs.readfile import load_json


class PhaseInputsError(RunDirError):
    """Outputs an earlier phase recorded are gone or changed: the phase that reads them cannot start."""


@dataclass(frozen=True)
class Upstream:
    """An earlier phase whose recorded outputs a stage reads.

    Args:
        name: the earlier phase, as messages name it (e.g. ``hash``).
        run_dir: its run directory, whose ledger says what it wrote.
        per_task: True when each source task reads only what the earlier source task with its own id wrote (a
            chained phase); False when every task reads all of it (a shuffle's buckets, a merge, a list).
    """

    name: str
    run_dir: str
    per_task: bool = False

    def as_json(self) -> dict[str, Any]:
        """As a task's metadata carries it (plain JSON, so a planned array's manifest can hold it)."""
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, value: Upstream | Mapping[str, Any]) -> Upstream:
        """An :class:`Upstream` from itself or from :meth:`as_json`."""
        if isinstance(value, Upstream):
            return value
        return cls(str(value["name"]), str(value["run_dir"]), bool(value.get("per_task")))


@dataclass(frozen=True)
class Recorded:
    """What one source task of an earlier phase wrote, by its latest done record: when it was recorded, and
    each output with its size (None where the record kept none, as records before sizes were kept), and the
    modification times it kept of local files (compared with the sizes, but not part of :func:`digest`)."""

    time: float
    files: tuple[tuple[str, int | None], ...]
    mtimes: tuple[tuple[str, int], ...] = ()


#: Recorded outputs already read in this process, by run directory, with the ledger files' sizes they were
#: read at (a bucket task's worker reads them once, not once per bucket; a grown ledger is read afresh).
_CACHE: dict[str, tuple[tuple[tuple[str, int], ...], dict[str, Recorded]]] = {}


def recorded(run_dir: str) -> dict[str, Recorded]:
    """Each done source task of ``run_dir`` and what its latest done record says it wrote."""
    key = _ledger_state(run_dir)
    cached = _CACHE.get(run_dir)
    if cached is not None and cached[0] == key:
        return cached[1]
    out: dict[str, Recorded] = {}
    for source, record in done_records(run_dir).items():
        kept = file_states(record, "written")
        if kept:
            files = tuple((p, size) for p, size, _ in kept)
        else:  # no sizes kept (an older record, or outputs it could not stat): the outputs it names
            files = tuple((p, None) for p in record.get("outputs") or [] if isinstance(p, str))
        mtimes = tuple(sorted((p, m) for p, _, m in kept if m is not None))
        when = record.get("time")
        out[source] = Recorded(float(when) if isinstance(when, (int, float)) else 0.0, tuple(sorted(files)), mtimes)
    _CACHE[run_dir] = (key, out)
    return out


#: The digest of all of an earlier phase's outputs, by run directory, for the recorded outputs it was taken of.
_WHOLE: dict[str, tuple[dict[str, Recorded] | None, str]] = {}


def _ledger_state(run_dir: str) -> tuple[tuple[str, int], ...]:
    directory = os.path.join(run_dir, LEDGER_DIR)
    try:
        with os.scandir(directory) as entries:
            return tuple(sorted((e.name, e.stat().st_size) for e in entries if e.name.endswith(".jsonl")))
    except OSError:
        return ()


def files_of(upstream: Upstream, sources: Iterable[str] | None = None, suffix: str | None = None) -> list[str]:
    """The files the earlier phase recorded (of ``sources``, default all; ending in ``suffix``), sorted."""
    found = recorded(upstream.run_dir)
    chosen = found.values() if sources is None else (found[s] for s in sources if s in found)
    return sorted(p for r in chosen for p, _ in r.files if suffix is None or p.endswith(suffix))


def digest(upstream: Upstream, source: str | None = None) -> str:
    """What a task read of ``upstream``, as a short digest: the id, record time and outputs of each earlier
    source task it reads (all of them, or with ``per_task`` the one with id ``source``). A task whose inputs
    were recorded again since (redone, or new ones added) gets another digest."""
    found = recorded(upstream.run_dir)
    whole = not (upstream.per_task and source is not None)
    if whole and _WHOLE.get(upstream.run_dir, (None, ""))[0] is found:
        return _WHOLE[upstream.run_dir][1]
    ids = [source] if source is not None and not whole else sorted(found)
    h = xxhash.xxh64(seed=0)
    for i in ids:
        r = found.get(i)
        h.update(f"{i}\t{r.time if r else 'missing'}\t{r.files if r else ''}\n".encode("utf-8", "surrogateescape"))
    if whole:
        _WHOLE[upstream.run_dir] = (found, h.hexdigest())
    return h.hexdigest()


def combined_digest(upstreams: Sequence[Upstream], source: str) -> str | None:
    """The digest of everything task ``source`` reads of ``upstreams`` (None when it reads no earlier phase)."""
    if not upstreams:
        return None
    return xxhash.xxh64_hexdigest("".join(digest(u, source) for u in upstreams).encode("ascii"), seed=0)


def problems(upstream: Upstream) -> list[str]:
    """The recorded outputs of ``upstream`` that are gone or changed now (another size; for local files also
    another modification time: a rewrite at the same size), one phrase each (objects are looked at with one
    listing per prefix)."""
    found = recorded(upstream.run_dir).values()
    files: list[tuple[str, int | None, int | None]] = []
    for r in found:
        mtimes = dict(r.mtimes)
        files.extend((p, size, mtimes.get(p)) for p, size in r.files)
    changed = changed_files(files)
    out = []
    for path, _, _ in files:
        if path in changed:
            what = changed[path].replace(" when recorded", f" when phase {upstream.name!r} recorded it")
            out.append(f"{path}: {what}")
    return out


def check(upstreams: Sequence[Upstream], who: str, remedy: str) -> None:
    """Refuse (:class:`PhaseInputsError`) when a recorded output of any of ``upstreams`` is gone or changed,
    naming the files, the phase that wrote them, and what to run (``remedy``)."""
    for u in upstreams:
        found = problems(u)
        if found:
            more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
            raise PhaseInputsError(
                f"{who} cannot start: {len(found)} output(s) that phase {u.name!r} recorded are gone or changed: "
                f"{'; '.join(found[:3])}{more}. Reading what is left would lose or duplicate documents. {remedy}"
            )


def save(run_dir: str, upstreams: Sequence[Upstream]) -> None:
    """Keep in ``run_dir`` which earlier phases its run reads, for `status --verify` and `retry` (which do not
    build the pipeline); written only when it changes."""
    path = os.path.join(run_dir, UPSTREAMS_FILE)
    payload = [u.as_json() for u in upstreams]
    try:
        if load_json(path) == payload:
            return
    except (OSError, ValueError, RunDirError):
        pass
    fs.atomic_write_text(path, json.dumps(payload))


def load(run_dir: str) -> list[Upstream]:
    """The earlier phases the run in ``run_dir`` reads, as :func:`save` kept them (none when it kept none)."""
    try:
        return [Upstream.of(u) for u in load_json(os.path.join(run_dir, UPSTREAMS_FILE))]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RunDirError):
        return []


def stale(upstreams: Sequence[Upstream], records: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The done tasks among ``records`` (source -> latest done record) whose recorded ``upstream`` digest is
    not what they would read now: an earlier phase recorded its outputs again since they were done."""
    if not upstreams:
        return set()
    return {
        source
        for source, record in records.items()
        if record.get("upstream") is not None and record["upstream"] != combined_digest(upstreams, source)
    }


def upstreams_of(stages: Iterable[object]) -> list[Upstream]:
    """The earlier phases that ``stages`` read (each stage's ``upstreams()``), each once."""
    out: list[Upstream] = []
    for stage in stages:
        for u in getattr(stage, "upstreams", lambda: [])():
            if isinstance(u, Upstream) and u not in out:
                out.append(u)
    return out


__all__ = [
    "PhaseInputsError",
    "Recorded",
    "Upstream",
    "check",
    "combined_digest",
    "digest",
    "files_of",
    "load",
    "problems",
    "recorded",
    "save",
    "stale",
    "upstreams_of",
]

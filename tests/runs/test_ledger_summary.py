"""The ledger files' summaries give `status` exactly what reading every record gives: a task done twice (in one
file or two) counts once, a task that failed and then was done is done, a torn last line is no record, and a
summary that is stale, damaged or missing is read around; and `status` of a real run uses them."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_slurm.runs.ledger import LedgerWriter, ledger_files, load_status
from curator_slurm.runs.ledger_summary import SUMMARIES_DIR, load_file_summary, read_run, summary_paths
from curator_slurm.runs.summary import summarise_done
from curator_slurm.shard import ShardSpec
from curator_slurm.tasks import content_id

IDS = [content_id(f"task-{i}") for i in range(40)] + ["custom:a", "custom:b"]  # hex ids and others


def _record(rng: random.Random, source: str, done: bool) -> dict[str, Any]:
    if not done:
        return {"source": source, "status": "failed", "stage": "f", "error": "E: x", "seconds": rng.random()}
    rows = rng.randint(0, 50)
    out = rng.randint(0, rows)
    record: dict[str, Any] = {
        "source": source, "status": "done", "outputs": [], "rows_in": rows, "rows_out": out,
        "seconds": round(rng.random() * 3, 4), "attempts": 1,
        "stages": [["reader", 0, rows], ["filter", rows, out, rng.randint(0, 99), 0]],
        "stage_seconds": [round(rng.random(), 5), round(rng.random(), 5)],
    }  # fmt: skip
    if rng.random() < 0.3:
        record["notes"] = {"counts": {"skipped": 1}, "damaged": [{"file": f"{source}.warc", "offset": 7, "error": "e"}]}
    if rng.random() < 0.3:
        record["tokens"] = rng.randint(1, 100)
    return record


def _reference(run_dir: str) -> tuple[dict[str, Any], Any]:
    """What reading every record gives (the code path status took before summaries)."""
    state = load_status(run_dir)
    return state.failed, summarise_done(run_dir, set(state.done))


def _facts(failed: dict[str, Any], summary: Any) -> dict[str, Any]:
    return {
        "failed": {s: (r.get("shard"), r.get("seconds"), r.get("array_job_id")) for s, r in failed.items()},
        "done": summary.done,
        "records": summary.records,
        "rows": (summary.rows_in, summary.rows_out, summary.tokens),
        "times": (summary.first_time, summary.last_time),
        "shards": {k: {**v, "seconds": round(v["seconds"], 6)} for k, v in summary.shards.items()},
        "funnel": [(r.stage, r.rows_in, r.rows_out, r.chars_removed, round(r.seconds or 0, 3)) for r in summary.funnel],
        "counts": summary.notes.get("counts"),
        "damaged": sorted(json.dumps(d, sort_keys=True) for d in summary.notes.get("damaged") or []),
        "durations": (summary.durations.count, round(summary.durations.total, 6)),
        "slowest": sorted(summary.durations.slowest),
        "per_minute": summary.per_minute,
        "jobs": summary.jobs,
    }


writers = st.lists(
    st.tuples(
        st.lists(st.tuples(st.integers(0, len(IDS) - 1), st.booleans()), min_size=0, max_size=12),
        st.sampled_from(["intact", "torn", "stale", "no summary", "bad keys", "old summary"]),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writers=writers, seed=st.integers(0, 1000))
def test_summaries_give_what_every_record_gives(tmp_path_factory: pytest.TempPathFactory, writers, seed) -> None:
    """Several writers (shards) record tasks done and failed, repeats included; then their files are damaged in
    the ways a crash or an old release leaves them. read_run equals the record-by-record reading."""
    run_dir = str(tmp_path_factory.mktemp("run"))
    rng = random.Random(seed)
    for index, (events, fate) in enumerate(writers):
        writer = LedgerWriter(run_dir, ShardSpec.explicit(index, len(writers)), window=rng.randint(1, 4))
        for which, done in events:
            writer.write(_record(rng, IDS[which], done))
        writer.close()
        if not events:
            continue
        path = writer.path
        summary, keys = summary_paths(path)
        if fate == "torn":
            with open(path, "ab") as f:
                f.write(b'{"source":"' + IDS[0].encode() + b'","status":"do')
        elif fate == "stale":  # records written after the summary (a writer killed between the two)
            with open(path, "ab") as f:
                f.write((json.dumps(_record(rng, IDS[1], True)) + "\n").encode())
        elif fate == "no summary":
            os.unlink(summary)
        elif fate == "bad keys":
            with open(keys, "r+b") as f:
                f.write(b"\xff" * 8)
        elif fate == "old summary":
            data = json.loads(Path(summary).read_text())
            Path(summary).write_text(json.dumps({**data, "version": 0}))
    assert _facts(*read_run(run_dir)) == _facts(*_reference(run_dir))


def test_a_summary_is_read_only_where_it_is_whole(tmp_path: Path) -> None:
    run_dir = str(tmp_path)
    writer = LedgerWriter(run_dir, ShardSpec.explicit(0, 1), window=2)
    rng = random.Random(1)
    for i in range(5):
        writer.write(_record(rng, IDS[i], True))
    writer.close()
    (path,) = ledger_files(run_dir)
    assert load_file_summary(path) is not None
    with open(path, "ab") as f:
        f.write(b'{"source": "torn')
    assert load_file_summary(path) is not None, "a torn last line is not a record: the summary still covers all"
    with open(path, "ab") as f:
        f.write(b'"}\n')
    assert load_file_summary(path) is None, "a record the summary does not cover: stale"
    assert (tmp_path / SUMMARIES_DIR).is_dir()


def test_a_task_done_in_two_files_counts_once_with_its_last_record(tmp_path: Path) -> None:
    run_dir = str(tmp_path)
    rng = random.Random(2)
    for index in range(3):
        writer = LedgerWriter(run_dir, ShardSpec.explicit(index, 3))
        for i in range(4):
            writer.write(_record(rng, IDS[index * 2 + i], True))  # neighbours overlap by two ids
        writer.close()
    failed, summary = read_run(run_dir)
    assert summary.done == 8 and not failed
    assert _facts(failed, summary) == _facts(*_reference(run_dir))


def test_status_reads_the_summary_not_the_records(tmp_path: Path) -> None:
    """With whole summaries, the records themselves are not read: a record rewritten in place (same length, an
    earlier line, so neither the length nor the last bytes change) does not change what read_run says (that is
    what `status --verify`, which reads everything, is for)."""
    run_dir = str(tmp_path)
    writer = LedgerWriter(run_dir, ShardSpec.explicit(0, 1), window=1)
    rng = random.Random(3)
    for i in range(30):
        writer.write({**_record(rng, IDS[i], True), "rows_in": 10})
    writer.close()
    (path,) = ledger_files(run_dir)
    before = read_run(run_dir)[1]
    data = Path(path).read_bytes()
    Path(path).write_bytes(data.replace(b'"rows_in":10', b'"rows_in":99', 1))
    assert read_run(run_dir)[1].rows_in == before.rows_in == 300
    assert _reference(run_dir)[1].rows_in == 389


def test_keys_looked_at_a_range_at_a_time_give_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With few keys in memory at once (a ledger of hundreds of millions of records), repeats and failed-then-done
    tasks are still found, range by range."""
    from curator_slurm.runs import ledger_summary

    run_dir = str(tmp_path)
    rng = random.Random(4)
    for index in range(4):
        writer = LedgerWriter(run_dir, ShardSpec.explicit(index, 4))
        for i in range(12):
            writer.write(_record(rng, IDS[(index * 9 + i) % len(IDS)], rng.random() < 0.8))
        writer.close()
    whole = _facts(*read_run(run_dir))
    monkeypatch.setattr(ledger_summary, "KEYS_AT_ONCE", 5)
    assert _facts(*read_run(run_dir)) == whole == _facts(*_reference(run_dir))

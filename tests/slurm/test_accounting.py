"""What the report reads of Slurm accounting: sacct's lines summed per array job (tasks, states, the largest MaxRSS
of any step, CPU efficiency, queue wait), its units and durations, and a plain reason where accounting does not
answer (the test cluster has no slurmdbd: sacct says so in its own words)."""

from __future__ import annotations

import datetime
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from curator_slurm.slurm.accounting import accounting, duration_seconds, memory_bytes, parse_sacct

#: sacct --parsable2 --noheader --format JobID,State,Submit,Start,End,ElapsedRaw,TotalCPU,AllocCPUS,MaxRSS,NodeList
SACCT = """\
214_0|COMPLETED|2026-12-04T18:09:40|2026-12-04T18:09:49|2026-12-04T18:09:59|10|00:08.000|2||node1
214_0.batch|COMPLETED|2026-12-04T18:09:49|2026-12-04T18:09:49|2026-12-04T18:09:59|10|00:08.000|2|204800K|node1
214_0.extern|COMPLETED|2026-12-04T18:09:49|2026-12-04T18:09:49|2026-12-04T18:09:59|10|00:00:00|2|1024K|node1
214_1|FAILED|2026-12-04T18:09:40|2026-12-04T18:09:43|2026-12-04T18:09:53|10|00:02.000|2||node2
214_1.batch|FAILED|2026-12-04T18:09:43|2026-12-04T18:09:43|2026-12-04T18:09:53|10|00:02.000|2|1.5G|node2
216_0|CANCELLED by 0|2026-12-04T18:09:40|Unknown|Unknown|0|00:00:00|0||None assigned
999_0|COMPLETED|2026-12-04T18:09:40|2026-12-04T18:09:41|2026-12-04T18:09:42|1|00:01.000|1|1K|node3
"""


def test_sacct_lines_are_summed_per_array_job() -> None:
    hashes, finds = (a.as_dict() for a in parse_sacct(SACCT, ["214", "216"]))
    assert hashes["tasks"] == 2 and hashes["states"] == {"COMPLETED": 1, "FAILED": 1}
    assert hashes["max_rss"] == int(1.5 * 2**30), "the largest step's, over every task"
    assert hashes["cpu_efficiency"] == pytest.approx(10.0 / 40.0), "8 + 2 CPU seconds of 2 x 2 CPUs x 10 s"
    assert (hashes["wait_median"], hashes["wait_max"]) == (6.0, 9.0), "waits of 9 s and 3 s"
    assert hashes["nodes"] == ["node1", "node2"]
    assert finds["tasks"] == 1 and finds["states"] == {"CANCELLED": 1} and finds["wait_max"] is None
    assert finds["cpu_efficiency"] is None and finds["max_rss"] is None and finds["nodes"] == []


@given(st.integers(0, 2**40), st.sampled_from(["", "K", "M", "G"]))
def test_memory_in_sacct_units(n: int, unit: str) -> None:
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[unit]
    assert memory_bytes(f"{n}{unit}") == n * scale


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59), st.integers(0, 999))
def test_durations_in_sacct_form(days: int, hours: int, minutes: int, seconds: int, ms: int) -> None:
    whole = days * 86400 + hours * 3600 + minutes * 60 + seconds
    text = f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}" if days else f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    assert duration_seconds(text) == whole
    if not days and not hours:
        assert duration_seconds(f"{minutes:02d}:{seconds:02d}.{ms:03d}") == pytest.approx(whole + ms / 1000)
    assert duration_seconds("") is None and memory_bytes("") is None


def test_without_accounting_the_reason_is_sacct_s_own() -> None:
    if shutil.which("sacct") is None:
        assert accounting(["1"]) == {"available": False, "reason": "sacct is not installed here"}
        return
    found = accounting(["1"])  # a job id no cluster here knows
    assert found["available"] is False and found["reason"], found
    assert accounting([]) == {"available": False, "reason": "the run has no submitted array job"}


def test_timestamps_are_local_time() -> None:
    from curator_slurm.slurm.accounting import timestamp

    when = datetime.datetime(2026, 12, 4, 18, 9, 40)
    assert timestamp("2026-12-04T18:09:40") == when.timestamp()
    assert timestamp("Unknown") is None and timestamp("None") is None

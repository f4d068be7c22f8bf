"""One guard for every process of a run directory, and `status` that tells the truth about what it finds there: a
plain script beside a running `curator-slurm local` is refused (no task done twice); processes all stopped give
a warning and no ETA; done records the listing lacks are not counted; outputs of removed inputs are reported;
`failures` escapes terminal control characters; an edited summary is not believed; a damaged run.json is
damage, not "100 % done"."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import iter_records
from support.helpers import REPO, clean_env, run_example

GATE = REPO / "tests" / "support" / "gate_script.py"
RUN = ".curator-run"


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "curator_slurm.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(env), timeout=timeout)


def gate_inputs(root: Path, files: int = 6) -> Path:
    """``files`` small JSONL files, and ``wait.jsonl`` (sorted last) whose documents wait at the gate."""
    root.mkdir(parents=True)
    for i in range(files):
        (root / f"f{i}.jsonl").write_text("".join(json.dumps({"text": f"doc {i} {j}"}) + "\n" for j in range(3)))
    (root / "wait.jsonl").write_text(json.dumps({"text": "WAIT here"}) + "\n")
    return root


def gate_args(data: Path, out: Path, gate: Path) -> list[str]:
    return ["--input", str(data), "--output", str(out), "--gate", str(gate)]


def until(check, what: str, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    """Wait (polling) until ``check()`` holds; fail naming ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def done_ids(run_dir: Path) -> list[str]:
    return [r["source"] for r in iter_records(str(run_dir)) if r.get("status") == "done"]


@pytest.fixture
def background() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts in the background (each in a session of its own), ended with every process
    they started (continued first) when it ends, whether it passed or not."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGCONT)
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_a_plain_script_beside_a_running_local_is_refused(tmp_path: Path, background: list) -> None:
    data, out, gate = gate_inputs(tmp_path / "in"), tmp_path / "out", tmp_path / "gate"
    local = subprocess.Popen(
        [sys.executable, "-m", "curator_slurm.cli", "local", str(GATE), "--shards", "2", "--logs",
         str(tmp_path / "logs"), "--", *gate_args(data, out, gate)],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    background.append(local)
    live = out / RUN / "live"
    until(lambda: len(list(live.glob("*"))) >= 2, "the local run's shards to start")  # local's + a shard's

    plain = subprocess.run([sys.executable, str(GATE), *gate_args(data, out, gate)], capture_output=True,
                           text=True, env=clean_env(), timeout=300)  # fmt: skip
    assert plain.returncode != 0, plain.stdout + plain.stderr
    assert "another process works in this run directory" in plain.stderr, plain.stderr

    gate.touch()
    local.communicate(timeout=300)
    assert local.returncode == 0
    ids = done_ids(out / RUN)
    assert len(ids) == 7 and len(set(ids)) == 7, "every task done once"
    assert json.loads(cli("status", str(out / RUN), "--json").stdout)["done"] == 7


def test_processes_all_stopped_give_a_warning_and_no_eta(tmp_path: Path, background: list) -> None:
    data, out, gate = gate_inputs(tmp_path / "in"), tmp_path / "out", tmp_path / "gate"
    run = subprocess.Popen([sys.executable, str(GATE), *gate_args(data, out, gate)], env=clean_env(
        {"CURATOR_LEDGER_WINDOW": "1"}), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)  # fmt: skip
    background.append(run)
    until(lambda: len(done_ids(out / RUN)) == 6, "the six tasks before the gate")
    os.kill(run.pid, signal.SIGSTOP)
    stat = Path(f"/proc/{run.pid}/stat")
    until(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "T", "the process to stop")

    status = json.loads(cli("status", str(out / RUN), "--json").stdout)
    assert status["pending"] == 1 and status["eta_seconds"] is None, status
    text = cli("status", str(out / RUN)).stdout
    assert "warning: every process of this run is stopped" in text, text

    os.kill(run.pid, signal.SIGCONT)
    gate.touch()
    assert run.wait(timeout=300) == 0


def test_done_records_the_listing_lacks_are_not_counted(corpus: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in"
    shutil.copytree(corpus, inp)
    run_example(inp, tmp_path / "out")
    other = tmp_path / "other"
    (other / "x").mkdir(parents=True)
    shutil.copy(next(inp.glob("*.jsonl")), other / "x" / "extra.jsonl")
    run_example(other / "x", tmp_path / "other-out")
    (copied,) = (tmp_path / "other-out" / RUN / "ledger").glob("*.jsonl")
    shutil.copy(copied, tmp_path / "out" / RUN / "ledger" / "p.h1.0.copied.jsonl")

    status = json.loads(cli("status", str(tmp_path / "out" / RUN), "--json").stdout)
    assert (status["total"], status["done"], status["percent"]) == (12, 12, 100.0), status
    assert status["done_not_listed"] == 1
    verify = cli("status", str(tmp_path / "out" / RUN), "--verify")
    assert verify.returncode == 1 and "accounted for by nothing" in verify.stdout, verify.stdout


def test_the_output_of_a_removed_input_is_reported(corpus: Path, tmp_path: Path) -> None:
    inp, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(corpus, inp)
    run_example(inp, out)
    removed = sorted(inp.glob("*.jsonl"))[0]
    before = set(out.glob("*.parquet"))
    removed.unlink()
    run_example(inp, out, env={"CURATOR_ACCEPT_NEW_INPUTS": "1"})
    assert set(out.glob("*.parquet")) == before  # the removed input's output is still there ...
    verify = cli("status", str(out / RUN), "--verify")
    assert verify.returncode == 1, verify.stdout  # ... and reported, not silently left unaccounted
    assert "1 output(s) of done source tasks that the current listing no longer holds" in verify.stdout
    assert "11 total, 11 done" in verify.stdout, verify.stdout
    leftover = verify.stdout.split("accounted for by nothing (")[1].split(")")[0]
    Path(leftover).unlink()
    again = cli("status", str(out / RUN), "--verify")
    assert again.returncode == 0, again.stdout


def test_failures_escapes_terminal_control_characters(corpus: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in"
    shutil.copytree(corpus, inp)
    evil = inp / "evil\x1b[2J\x1b]0;pwned\x07.jsonl"
    evil.write_bytes(b"")  # an empty file fails its source task, naming the file
    run_example(inp, tmp_path / "out", check=False)
    failures = cli("failures", str(tmp_path / "out" / RUN))
    assert "evil" in failures.stdout, failures.stdout + failures.stderr
    assert "\x1b" not in failures.stdout and "\x07" not in failures.stdout
    assert "evil\\x1b[2J\\x1b]0;pwned\\x07.jsonl" in failures.stdout


def test_a_summary_whose_totals_were_edited_is_not_believed(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_example(corpus, out)
    truth = json.loads(cli("status", str(out / RUN), "--json").stdout)
    (summary,) = (out / RUN / "ledger-summaries").glob("*.json")
    data = json.loads(summary.read_text())
    data["rows_in"] = 1_000_000_000
    summary.write_text(json.dumps(data))
    status = json.loads(cli("status", str(out / RUN), "--json").stdout)
    assert status["rows_in"] == truth["rows_in"] != 1_000_000_000


def test_a_run_directory_with_only_a_damaged_run_json_is_damage(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_bytes(b'{"fingerprint": "ab\xff')
    status = cli("status", str(run))
    assert status.returncode != 0, status.stdout
    assert "run.json" in status.stderr and "100" not in status.stdout, status.stdout + status.stderr

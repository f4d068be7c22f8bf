"""The per-page time limit of HTML extractors holds in C code: Resiliparse on a page of 64,000 nested <div>
(minutes of C code that no signal interrupts) is stopped at the limit through examples/extract.py, and a stop
signal takes effect within its grace period while such a page is being extracted; a page that kills the
process extracting it is counted as that, never as a time-out; pages after a killed one are extracted as
they would be without it (Trafilatura's per-task duplicate cache rebuilt)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curator_slurm import Pipeline
from curator_slurm.runs.ledger import iter_records
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.stages import JsonlWriter, ResiliparseExtractor, TrafilaturaExtractor, WarcReader
from support.docfiles import output_rows, run
from support.helpers import REPO, clean_env
from support.warclayouts import crawl, gzip_members, response
from support.webfixtures import pages

PYTHON_DOCS = "python3.11-doc"
EXTRACT = REPO / "examples" / "extract.py"
#: A page Resiliparse takes minutes on (its main-content pass is quadratic in the nesting depth).
NESTED = b"<html><body>" + b"<div>x" * 64_000 + b"</div>" * 64_000 + b"</body></html>"


@pytest.fixture(scope="module")
def few() -> list[Path]:
    return pages(PYTHON_DOCS, "tutorial/*.html", 6)


def warc_with(tmp: Path, few: list[Path], extra: list[bytes], at: int = 5) -> Path:
    """A Common Crawl style file of ``few`` with ``extra`` records inserted after record ``at``."""
    records = crawl(few)
    path = tmp / "in" / "pages.warc.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip_members([*records[:at], *extra, *records[at:]], [1]))
    return path


def notes_of(out: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in iter_records(str(out / DEFAULT_RUN_DIR_NAME)):
        assert record["status"] == "done", record
        for cause, n in record.get("notes", {}).get("counts", {}).items():
            counts[cause] = counts.get(cause, 0) + n
    return counts


def texts(out: Path) -> dict[str, str]:
    rows = [json.loads(line) for f in sorted(out.glob("*.jsonl")) for line in f.read_text().splitlines()]
    return {r["url"]: r["text"] for r in rows}


def test_resiliparse_stuck_in_c_code_is_stopped_at_the_limit(few: list[Path], tmp_path: Path) -> None:
    """examples/extract.py --extractor resiliparse --time-limit 1 on the 64,000-<div> page among real pages:
    the run ends (a hang guard of 300 s, the page alone takes far longer), the page is counted under the time
    limit, and every other page has the text it has in a run without it."""
    warc_with(tmp_path / "slow", few, [response("https://x.example/nested", NESTED, 900)])
    warc_with(tmp_path / "plain", few, [])
    for name in ("slow", "plain"):
        command = [sys.executable, str(EXTRACT), "--input", str(tmp_path / name / "in"), "--output"]
        command += [str(tmp_path / name / "out"), "--extractor", "resiliparse", "--time-limit", "1", "--workers", "1"]
        proc = subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    assert notes_of(tmp_path / "slow" / "out") == {"resiliparse_extractor: time limit (1.0 s) expired": 1}
    assert texts(tmp_path / "slow" / "out") == texts(tmp_path / "plain" / "out")
    assert len(texts(tmp_path / "plain" / "out")) == 6


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def test_stop_signal_takes_effect_within_the_grace_period_while_a_page_is_stuck(
    few: list[Path], tmp_path: Path
) -> None:
    """SIGTERM to examples/extract.py (one worker, no time limit to speak of) while Resiliparse is deep in the
    64,000-<div> page: the run ends after its 3 s grace period (a hang guard of 120 s; the page takes minutes),
    the child extracting the page is gone, and the task is not recorded done (a re-run does it)."""
    warc_with(tmp_path, few, [response("https://x.example/nested", NESTED, 900)], at=1)
    command = [sys.executable, str(EXTRACT), "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]
    command += ["--extractor", "resiliparse", "--time-limit", "3600", "--workers", "1"]
    proc = subprocess.Popen(
        command, env=clean_env({"CURATOR_GRACE_SECONDS": "3"}), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        for _ in range(600):  # until the extraction child is forked
            if proc.poll() is not None or children_of(proc.pid):
                break
            time.sleep(0.1)
        (child,) = children_of(proc.pid)
        time.sleep(2)  # well inside the nested page by now
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"received SIGTERM" in stderr, stderr.decode()[-3000:]
    assert not os.path.exists(f"/proc/{child}"), "the extraction child outlived its driver"
    ledger = tmp_path / "out" / DEFAULT_RUN_DIR_NAME
    assert ledger.is_dir() and not [r for r in iter_records(str(ledger)) if r["status"] == "done"]


class Crashing(ResiliparseExtractor):
    """Resiliparse, except that a page holding ``CRASH-HERE`` kills the process extracting it (as a segfault
    in a C library does)."""

    def extract(self, html: str) -> str | None:
        if "CRASH-HERE" in html:
            os.kill(os.getpid(), signal.SIGSEGV)
        if "RAISE-HERE" in html:
            raise ValueError("no such page")
        return super().extract(html)


def test_a_page_that_kills_the_extraction_process_is_counted_as_that(few: list[Path], tmp_path: Path) -> None:
    """A page on which the library crashes the process and one on which it raises: each is dropped and counted
    by what happened (the signal, the exception), not as a time-out; the task is done and the other pages are
    extracted."""
    extra = [
        response("https://x.example/crash", b"<html><body><p>CRASH-HERE</p></body></html>", 901),
        response("https://x.example/raise", b"<html><body><p>RAISE-HERE</p></body></html>", 902),
    ]
    path = warc_with(tmp_path, few, extra)
    out = tmp_path / "out"
    run(Pipeline("crash").add_stage(WarcReader(path)).add_stage(Crashing(time_limit=30)).add_stage(JsonlWriter(out)))
    assert notes_of(out) == {
        "crashing: extraction process died on the page (killed by SIGSEGV)": 1,
        "crashing: ValueError in resiliparse": 1,
    }
    assert len(output_rows(out)) == 6


def test_pages_after_a_killed_one_keep_trafilaturas_per_task_duplicate_cache(tmp_path: Path) -> None:
    """Trafilatura (deduplicate=True: a paragraph seen more than twice before in the source task is dropped) on
    five pages read four times, with a page past the time limit after the seventh: after the child is killed
    and forked again, the pages after it give exactly what they give in a run without the slow page."""
    shared = pages(PYTHON_DOCS, "tutorial/*.html", 5)
    huge = "".join(f"<p>Paragraph {i} tells of item {i * 7 % 1000} and word {i * 13 % 997}.</p>" for i in range(60_000))
    slow = response("https://x.example/slow", f"<html><body><article>{huge}</article></body></html>".encode(), 900)
    runs = {}
    for name, extra in (("slow", [slow]), ("plain", [])):
        path = warc_with(tmp_path / name, shared * 4, extra, at=1 + 2 * 7)  # after the 7th page
        out = tmp_path / name / "out"
        stage = TrafilaturaExtractor(time_limit=5.0)  # the slow page takes over 10 s of CPU, the others under 0.3
        run(Pipeline(name).add_stage(WarcReader(path)).add_stage(stage).add_stage(JsonlWriter(out)))
        runs[name] = {r["url"]: r["text"] for r in output_rows(out)}
    assert notes_of(tmp_path / "slow" / "out") == {"trafilatura_extractor: time limit (5.0 s) expired": 1}
    assert runs["slow"] == runs["plain"] and len(runs["plain"]) == 20


class _Echo:
    """A stage for PagePool: a page's text upper-cased; "stuck" never ends, "crash" kills its process, and
    every page seen since ``begin`` is remembered (per-task state, rebuilt by replay after a kill)."""

    def load(self) -> None:
        self.seen: list[str] = []

    def begin(self) -> None:
        self.seen = []

    def extract(self, html: str) -> str:
        if html == "stuck":
            time.sleep(3600)
        if html == "crash":
            os._exit(3)
        self.seen.append(html)
        return f"{html.upper()}:{len(self.seen)}"


def test_pages_handed_ahead_come_back_in_order_around_stuck_and_dying_pages() -> None:
    """More pages than the window, stuck and dying ones among them (one right after another, one last): every
    other page's result is the one a child that saw only the pages before it would give, in order; the stuck
    ones time out, the dying ones are counted as dying, and no child is left behind."""
    from curator_slurm.stages.extractors.pool import WINDOW, PagePool

    pages = [f"p{i}" for i in range(3 * WINDOW)]
    pages[3], pages[4], pages[WINDOW + 1], pages[-1] = "stuck", "crash", "stuck", "stuck"
    pool = PagePool(_Echo(), 0.5)
    try:
        done: list[str] = []

        def replay(upto: int) -> list[str]:
            return [pages[k] for k in range(upto - 1) if pages[k] not in ("stuck", "crash")]

        got = list(pool.run(pages, replay))
    finally:
        pool.kill()
    assert [i for i, _ in got] == list(range(len(pages)))
    for i, outcome in got:
        if pages[i] == "stuck":
            assert outcome.kind == "timeout"
        elif pages[i] == "crash":
            assert outcome.kind == "died" and "exit status 3" in outcome.value
        else:
            done.append(pages[i])
            assert (outcome.kind, outcome.value) == ("ok", f"{pages[i].upper()}:{len(done)}")
    assert pool.pid is None and pool.restarts == 4

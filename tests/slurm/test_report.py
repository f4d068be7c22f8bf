"""`curator-slurm report RUN_OR_OUTPUT -o page.html` writes one self-contained page (nothing fetched when it is
opened), which headless Chromium renders with its charts and no script error: for a plain run with failures, a
workflow (a section per phase) and a run whose output is on S3. Each test leaves a screenshot beside its page
and prints where."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.browser import Rendered, render
from support.helpers import REPO, clean_env
from support.s3tools import endpoint, new_bucket, s3_env, upload_tree


@pytest.fixture(autouse=True)
def plotly_installed() -> None:
    """The report extra; without it the tests skip, unless CURATOR_REQUIRE_SLURM=1 (CI), where they fail."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        why = "the report extra is not installed (pip install -e '.[report]')"
        if os.environ.get("CURATOR_REQUIRE_SLURM") == "1":
            pytest.fail(f"CURATOR_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)


CURATE = REPO / "examples" / "curate.py"
DEDUP = REPO / "examples" / "dedup.py"


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", *args], capture_output=True, text=True, timeout=600,
        cwd=cwd, env=env or clean_env(),
    )  # fmt: skip


def check_page(page: Path, *sections: str) -> Rendered:
    """The page holds every one of ``sections``, loads nothing from anywhere, and renders its charts in
    Chromium without a script error."""
    text = page.read_text()
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=", text), "a resource from elsewhere"
    for section in sections:
        assert section in text, section
    charts = text.count("data-chart=")
    rendered = render(page, page.with_suffix(".png"))
    print(f"\nscreenshot of {page.name}: {rendered.screenshot}")
    assert rendered.errors == [], rendered.errors
    assert rendered.screenshot.stat().st_size > 10_000
    drawn = rendered.dom.count('class="main-svg"')
    assert charts >= 4 and drawn >= 2 * charts, f"{drawn} plot layers drawn for {charts} charts"
    return rendered


def test_report_of_a_plain_run_with_failures(corpus: Path, tmp_path: Path) -> None:
    data = tmp_path / "in"
    shutil.copytree(corpus, data)
    broken = sorted(data.glob("*.jsonl"))[3]
    broken.write_text(broken.read_text() + "{not json\n")
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, str(CURATE), "--input", str(data), "--output", str(out), "--workers", "1"],
                         capture_output=True, text=True, env=clean_env(), timeout=300)  # fmt: skip
    assert ran.returncode == 1, ran.stderr
    page = tmp_path / "report.html"
    made = cli("report", str(out), "-o", str(page))
    assert made.returncode == 0, made.stderr
    assert str(page) in made.stdout
    status = json.loads(cli("status", str(out), "--json").stdout)
    rendered = check_page(
        page, "funnel per stage", "time per stage", "task durations", "slowest source tasks", "throughput over time",
        "failures by exception", "InputError", broken.name,
    )  # fmt: skip
    assert f"{status['done']:,} / {status['total']:,} done" in rendered.dom
    failed = next(iter(json.loads(cli("failures", str(out), "--json").stdout)))
    assert failed["source"] in page.read_text()


def test_report_of_a_workflow_has_a_section_per_phase(tmp_path: Path) -> None:
    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    for f in range(4):  # documents that repeat within and across files
        rows = [json.dumps({"id": f"{f}-{i}", "text": f"document {i % 7} " * 30}) + "\n" for i in range(25)]
        (data / f"part-{f}.jsonl").write_text("".join(rows))
    ran = subprocess.run([sys.executable, str(DEDUP), "--input", str(data), "--output", str(out), "--workers", "1",
                          "--buckets", "4"], capture_output=True, text=True, env=clean_env(), timeout=600)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    page = tmp_path / "workflow.html"
    made = cli("report", str(out), "-o", str(page))
    assert made.returncode == 0, made.stderr
    status = json.loads(cli("status", str(out), "--json").stdout)
    rendered = check_page(
        page, "<h2>overview</h2>", "<h2>timeline</h2>", "<h2>nodes</h2>", "<h2>Slurm accounting</h2>",
        "Slurm accounting not available: the run has no submitted array job",
        *(f"<h2>phase {name}</h2>" for name in status["phases"]),
    )  # fmt: skip
    text = page.read_text()
    assert text.index("<h2>overview</h2>") < text.index("<h2>timeline</h2>") < text.index("<h2>phase hash</h2>")
    numbers = status["numbers"]
    assert f"documents out<b>{numbers['documents']:,}</b>" in rendered.dom
    assert f"records in<b>{numbers['records']:,}</b>" in rendered.dom
    assert sum(numbers["length_log2"]) == numbers["documents"] and "document length of the documents written" in text
    assert_human_ticks(rendered.dom)


def assert_human_ticks(dom: str) -> None:
    """The clock axes' tick labels are whole seconds or minutes (``14:05:30``), never ``14:05:59.9996``."""
    ticks = re.findall(r'class="xtick"[^>]*>.*?<text[^>]*>([^<]*)</text>', dom)
    clock = [t for t in ticks if re.fullmatch(r"[\d:.]+", t) and ":" in t]
    assert clock, "a clock axis was drawn"
    assert all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in clock), clock


@pytest.mark.slurm
def test_report_of_a_workflow_on_the_cluster_has_its_overview_timeline_nodes_and_accounting(
    slurm_cluster: str, tmp_path: Path
) -> None:
    """The dedup workflow as real chained arrays on the test cluster: the report gives the overview, a timeline
    with each phase's array, the node that ran them, and what Slurm accounting says (or why it cannot)."""
    from support.slurmtools import wait_for_job

    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    for f in range(4):
        rows = [json.dumps({"id": f"{f}-{i}", "text": f"document {i % 7} " * 30}) + "\n" for i in range(25)]
        (data / f"part-{f}.jsonl").write_text("".join(rows))
    submitted = cli("submit", str(DEDUP), "--shards", "2", "--json", "--", "--input", str(data), "--output",
                    str(out), "--buckets", "2")  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    jobs = {name: record["arrays"][0]["job_id"] for name, record in json.loads(submitted.stdout).items()}
    for name, job in jobs.items():
        assert set(wait_for_job(job, timeout=300).values()) == {"COMPLETED"}, name
    page = tmp_path / "cluster.html"
    made = cli("report", str(out), "-o", str(page))
    assert made.returncode == 0, made.stderr
    rendered = check_page(page, "<h2>overview</h2>", "<h2>timeline</h2>", "<h2>nodes</h2>", "<h2>Slurm accounting</h2>")
    text = page.read_text()
    for job in jobs.values():
        assert f"array {job}" in text
    assert "Slurm accounting not available: " in text or "CPU efficiency" in text
    status = json.loads(cli("status", str(out), "--json").stdout)
    assert status["numbers"]["complete"] and f"documents out<b>{status['numbers']['documents']:,}</b>" in rendered.dom
    assert_human_ticks(rendered.dom)


def test_report_of_a_run_on_s3_shows_its_requests(corpus: Path, tmp_path: Path) -> None:
    server = endpoint()
    bucket = new_bucket(server)
    upload_tree(server, corpus, bucket, "in")
    env = clean_env(s3_env(server))
    out = f"s3://{bucket}/out"
    ran = subprocess.run([sys.executable, str(CURATE), "--input", f"s3://{bucket}/in", "--output", out, "--workers",
                          "1"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    page = tmp_path / "s3.html"
    made = cli("report", out, "-o", str(page), cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    requests = json.loads(cli("status", out, "--json", cwd=tmp_path, env=env).stdout)["s3"]["requests"]
    check_page(page, "S3 requests and retries", f"{requests:,} requests")

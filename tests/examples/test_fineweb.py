"""examples/fineweb.py, the FineWeb recipe as one script, on WARC files built from real HTML (Python's
documentation): planted copies of pages are removed by the MinHash phases, and the corpus is the same file for
file unsharded, as simulated array tasks per phase, after a kill -9 and a re-run, and as real chained arrays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.samples import web as web_sample
from support.helpers import REPO, clean_env, kill_when_recorded
from support.webfixtures import html_root

FINEWEB = REPO / "examples" / "fineweb.py"
PHASES = ["base", "signatures", "candidates", "components", "write", "pii"]


def warcs(tmp_path: Path) -> tuple[Path, list[str]]:
    """Two WARC files of narrative pages, and a third (sorted last) holding copies of 6 pages of the first
    under other URLs: the copies' URLs are returned."""
    root = html_root("python3.11-doc")
    pages = sorted(p for d in ("tutorial", "howto", "faq") for p in (root / d).glob("*.html"))[:36]
    assert len(pages) >= 24, f"too few pages under {root}"
    out = tmp_path / "warcs"
    out.mkdir()

    def url(p: Path, prefix: str = "https://docs.example/") -> str:
        return prefix + str(p.relative_to(root))

    web_sample.write_warc(str(out / "a.warc.gz"), [(str(p), url(p)) for p in pages[0::2]])
    web_sample.write_warc(str(out / "b.warc.gz"), [(str(p), url(p)) for p in pages[1::2]], first_number=1000)
    copies = pages[0::2][:6]
    mirror = "https://mirror.example/"
    web_sample.write_warc(str(out / "c.warc.gz"), [(str(p), url(p, mirror)) for p in copies], first_number=2000)
    return out, [url(p, mirror) for p in copies]


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(FINEWEB), *args], env=clean_env(env), check=True, capture_output=True, text=True
    )


def corpus(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}


def documents(out: Path) -> list[dict]:
    return [json.loads(line) for data in corpus(out).values() for line in data.decode().splitlines()]


def test_the_recipe_removes_planted_copies_and_sharded_equals_unsharded(tmp_path: Path) -> None:
    data, copies = warcs(tmp_path)
    ref = tmp_path / "ref"
    run(["--input", str(data), "--output", str(ref), "--workers", "1"])
    docs = documents(ref)
    assert len(docs) >= 5, "FineWeb's filters keep some of Python's narrative pages"
    urls = {d["url"] for d in docs}
    assert not urls & set(copies), "every planted copy (in the last file) is removed, its original kept"
    texts = [d["text"] for d in docs]
    assert len(set(texts)) == len(texts)
    undeduped = tmp_path / "nodedup"
    run(["--input", str(data), "--output", str(undeduped), "--workers", "1", "--no-dedup"])
    kept_copies = {d["url"] for d in documents(undeduped)} & set(copies)
    assert kept_copies, "without deduplication the copies that pass the filters stay"
    assert len(documents(undeduped)) == len(docs) + len(kept_copies)

    sharded = tmp_path / "sharded"
    for phase in PHASES:
        for index in range(4):
            env = {"CURATOR_PHASE": phase, "CURATOR_NUM_SHARDS": "4", "CURATOR_SHARD_INDEX": str(index)}
            run(["--input", str(data), "--output", str(sharded), "--workers", "1"], env)
    assert corpus(sharded) == corpus(ref)


def test_kill_9_mid_phase_then_rerun_gives_the_same_corpus(tmp_path: Path) -> None:
    data, _ = warcs(tmp_path)
    ref, out = tmp_path / "ref", tmp_path / "out"
    run(["--input", str(data), "--output", str(ref), "--workers", "1"])
    cmd = [sys.executable, str(FINEWEB), "--input", str(data), "--output", str(out), "--workers", "1"]
    kill_when_recorded(cmd, out / ".curator-work" / ".curator-run" / "candidates" / "ledger", timeout=300)
    run(["--input", str(data), "--output", str(out), "--workers", "1"])
    assert corpus(out) == corpus(ref)


@pytest.mark.slurm
def test_real_chained_arrays_equal_the_local_run(tmp_path: Path, slurm_cluster: str) -> None:
    from support.slurmtools import wait_for_job

    data, _ = warcs(tmp_path)
    ref, out = tmp_path / "ref", tmp_path / "out"
    run(["--input", str(data), "--output", str(ref), "--workers", "1"])
    proc = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "submit", str(FINEWEB), "--shards", "2", "--json", "--",
         "--input", str(data), "--output", str(out), "--workers", "1"],
        env=clean_env(), check=True, capture_output=True, text=True,
    )  # fmt: skip
    jobs = {name: record["arrays"][0]["job_id"] for name, record in json.loads(proc.stdout).items()}
    assert list(jobs) == PHASES
    for name in PHASES:
        assert set(wait_for_job(jobs[name], timeout=600).values()) == {"COMPLETED"}, name
    assert corpus(out) == corpus(ref)


def test_a_warc_file_whose_pages_are_all_dropped_early_gives_no_documents_and_no_failure(tmp_path: Path) -> None:
    """Every page of one file is dropped by the URL filter, so every later stage of its source task gets a batch
    of no rows: the recipe finishes, with that file's pages nowhere, and alone it gives an empty corpus."""
    data, _ = warcs(tmp_path)
    root = html_root("python3.11-doc")
    blocked = sorted((root / "library").glob("*.html"))[:5]
    web_sample.write_warc(str(data / "d.warc.gz"), [(str(p), f"https://blocked.example/{p.name}") for p in blocked])
    lists = tmp_path / "blocklist"
    lists.mkdir()
    (lists / "domains").write_text("blocked.example\n", encoding="utf-8")
    with_d = tmp_path / "with_d"
    done = run(["--input", str(data), "--output", str(with_d), "--workers", "1", "--url-blocklist", str(lists)])
    assert "0 failed" in done.stdout + done.stderr
    urls = {d["url"] for d in documents(with_d)}
    assert urls and not any("blocked.example" in u for u in urls)
    without_d = tmp_path / "without_d"
    (data / "d.warc.gz").rename(tmp_path / "d.warc.gz")
    run(["--input", str(data), "--output", str(without_d), "--workers", "1", "--url-blocklist", str(lists)])
    assert documents(with_d) == documents(without_d)

    alone = tmp_path / "alone"
    alone.mkdir()
    (tmp_path / "d.warc.gz").rename(alone / "d.warc.gz")
    out = tmp_path / "alone_out"
    run(["--input", str(alone), "--output", str(out), "--workers", "1", "--url-blocklist", str(lists)])
    assert documents(out) == []

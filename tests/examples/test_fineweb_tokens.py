"""examples/fineweb.py --tokenizer: one workflow from WARC files (built from real HTML) to Megatron ``.bin/.idx``
files. The token files hold exactly the documents of the same run's JSONL corpus, each once (read with the test
suite's own Megatron reader, compared as a multiset to tokenizing the corpus texts), unsharded, as 4 simulated
array tasks, as real chained arrays and on the S3 server. With ``--exclusions`` every step writes what it removed,
the dedup removals naming the document each duplicated, and kept + removed account for every extracted document
once. Errors about the tokenizer options are in the script's words and come before any work; a start that fails
on a missing input leaves no ``workflow.json``."""

from __future__ import annotations

import gzip
import itertools
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.samples import web as web_sample
from curator_slurm.stages import JsonlWriter, TrafilaturaExtractor, WarcReader
from curator_slurm.stages.datatrove import URLFilter
from examples.test_fineweb import warcs
from support.helpers import REPO, clean_env
from support.megatron_files import EOT, pairs, python_docs_text, sequences_of, train_tokenizer
from support.webfixtures import html_root

pytest.importorskip("tokenizers")

FINEWEB = REPO / "examples" / "fineweb.py"
TOKENIZE = REPO / "examples" / "tokenize_corpus.py"
PHASES = ["base", "signatures", "candidates", "components", "write", "pii", "tokenize", "merge"]
#: Every filtering step of the recipe and its exclusion directory (datatrove's names).
STEPS = ["1_url", "2_lang", "3_gopher_rep", "4_gopher_qual", "5_c4", "6_fineweb_qual", "7_dedup"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The WARC files of test_fineweb (6 planted copies in the last file), one of French pages (the language
    filter's) and one of blocked URLs (the URL filter's); a block list; a BPE tokenizer with ``<|endoftext|>``."""
    root = tmp_path_factory.mktemp("fwtok")
    warc_dir, copies = warcs(root)
    french = sorted((html_root("debian-handbook") / "fr-FR").glob("*.html"))[:4]
    assert french, "the Debian handbook's French pages"
    web_sample.write_warc(
        str(warc_dir / "d.warc.gz"), [(str(p), f"https://fr.example/{p.name}") for p in french], first_number=3000
    )
    blocked = sorted((html_root("python3.11-doc") / "library").glob("*.html"))[:3]
    urls = [(str(p), f"https://blocked-pages.com/{p.name}") for p in blocked]
    web_sample.write_warc(str(warc_dir / "e.warc.gz"), urls, first_number=4000)
    lists = root / "blocklist"
    lists.mkdir()
    (lists / "domains").write_text("blocked-pages.com\n", encoding="utf-8")
    tokenizer = train_tokenizer(root / "tokenizer.json", python_docs_text(), vocab_size=800)
    tok = root / "tokenizer.json"
    return {"warcs": warc_dir, "copies": copies, "blocklist": lists, "tok": tok, "tokenizer": tokenizer}


def recipe_args(data: dict[str, Any], out: Path | str, *extra: str, input_: str | None = None) -> list[str]:
    return [
        "--input", input_ or str(data["warcs"]), "--output", str(out), "--url-blocklist", str(data["blocklist"]),
        "--tokenizer", str(data["tok"]), "--eos-token", EOT, "--exclusions", "--workers", "1", *extra,
    ]  # fmt: skip


def run(cmd: list[str], env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, env=env or clean_env(), capture_output=True, text=True, timeout=900)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def corpus_rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(out.glob("*.jsonl")) for line in p.read_text().splitlines()]


def results(out: Path) -> dict[str, bytes]:
    """The corpus, the merged token files and the exclusions, by path relative to ``out``."""
    found = [*out.glob("*.jsonl"), *(out / "megatron").glob("*"), *(out / "removed").rglob("*.jsonl")]
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(found) if not p.name.startswith(".")}


def assert_tokens_are_the_corpus(out: Path, tokenizer: Any) -> None:
    """The merged token files hold one sequence per document of the JSONL corpus, its text's tokens and EOS,
    each once, nothing else."""
    eos = tokenizer.token_to_id(EOT)
    texts = [r["text"] for r in corpus_rows(out)]
    assert len(texts) >= 5, "FineWeb's filters keep some of Python's narrative pages"
    want = Counter(tuple([*tokenizer.encode(t, add_special_tokens=False).ids, eos]) for t in texts)
    parts = pairs(out / "megatron")
    assert [p.name for p in parts] == [f"part_{i:05d}" for i in range(len(parts))]
    got = Counter(tuple(s) for p in parts for s in sequences_of(p))
    assert got == want


@pytest.fixture(scope="module")
def reference(data: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "out"
    proc = run([sys.executable, str(FINEWEB), *recipe_args(data, out)])
    (out.parent / "stdout.txt").write_text(proc.stdout)
    return out


def extracted(data: dict[str, Any]) -> list[dict[str, Any]]:
    """What the recipe's extraction gives, by a pipeline of its own: URL filter (the block list), Trafilatura."""
    from support.docfiles import output_rows

    out = data["warcs"].parent / "extracted"
    if not out.exists():
        pipeline = (
            Pipeline("extracted")
            .add_stage(WarcReader(str(data["warcs"])))
            .add_stage(URLFilter(blocklist_dir=str(data["blocklist"])))
            .add_stage(TrafilaturaExtractor(time_limit=5.0))
            .add_stage(JsonlWriter(str(out)))
        )
        pipeline.run(LocalExecutor(workers=1))
    return output_rows(out)


def test_unsharded_tokens_hold_the_corpus_and_every_step_writes_what_it_removed(
    data: dict[str, Any], reference: Path
) -> None:
    assert_tokens_are_the_corpus(reference, data["tokenizer"])
    assert not (reference / "megatron" / "part_00001.idx").exists(), "one part without --merge-tokens"
    removed = {step: corpus_rows(reference / "removed" / step) for step in STEPS}
    assert all((reference / "removed" / step).is_dir() for step in STEPS)
    assert {r["url"] for r in removed["1_url"]} == {u for u in input_urls(data) if "blocked-pages.com" in u}
    assert removed["2_lang"] and all(r["url"].startswith("https://fr.example/") for r in removed["2_lang"])
    # Every extracted document is kept or removed by exactly one later step.
    accounted = Counter(r["url"] for step in STEPS[1:] for r in removed[step])
    accounted.update(r["url"] for r in corpus_rows(reference))
    assert accounted == Counter(r["url"] for r in extracted(data))
    # Each dedup removal names the document it duplicated: a kept document of the base phase, the original page.
    base = reference / ".curator-work" / "base"
    assert {r["url"] for r in removed["7_dedup"]} <= set(data["copies"]) and removed["7_dedup"]
    kept_urls = {r["url"] for r in corpus_rows(reference)}
    for r in removed["7_dedup"]:
        assert r["filter_reason"] == "duplicate"
        lines = (base / r["survivor_path"]).read_text().splitlines()
        survivor = json.loads(lines[r["survivor_row"]])
        assert survivor["url"] == r["url"].replace("https://mirror.example/", "https://docs.example/")
        assert survivor["url"] in kept_urls
    runs = reference / ".curator-work" / ".curator-run"
    status = run([sys.executable, "-m", "curator_slurm.cli", "status", str(runs)])
    for phase in PHASES:
        assert f"phase {phase}" in status.stdout, (phase, status.stdout)


def test_the_workflows_own_numbers_are_what_the_megatron_files_hold(data: dict[str, Any], reference: Path) -> None:
    """`status --json OUTPUT` has the workflow's numbers: its documents and tokens are those of the merged
    Megatron files, its records every WARC response record, and each step of the funnel takes in what the step
    before let out; fineweb.py printed the same line at its end, and `status` prints it first."""
    proc = run([sys.executable, "-m", "curator_slurm.cli", "status", str(reference), "--json"])
    numbers = json.loads(proc.stdout)["numbers"]
    sequences = [s for p in pairs(reference / "megatron") for s in sequences_of(p)]
    assert numbers["complete"] and numbers["documents"] == len(sequences) == len(corpus_rows(reference))
    assert numbers["tokens"] == sum(len(s) for s in sequences)
    assert numbers["records"] == len(input_urls(data))
    # The stats files' distributions: tokens per document as the Megatron files hold them, bytes per document
    # as the corpus holds them, in log2 buckets (a value's bucket is its bit length).
    tokens = Counter(len(s).bit_length() for s in sequences)
    assert numbers["token_log2"] == [tokens[k] for k in range(len(numbers["token_log2"]))]
    assert max(tokens) == len(numbers["token_log2"]) - 1
    lengths = Counter(len(r["text"].encode()).bit_length() for r in corpus_rows(reference))
    assert numbers["length_log2"] == [lengths[k] for k in range(max(lengths) + 1)]
    steps = numbers["funnel"]
    assert [s["stage"] for s in steps if s["removed"]][-1] == "remove_duplicates"
    assert steps[0]["documents_in"] == numbers["records"] and steps[-1]["documents_out"] == numbers["documents"]
    for before, after in itertools.pairwise(steps):
        assert after["documents_in"] == before["documents_out"]
        assert before["documents_in"] - before["removed"] == before["documents_out"]
    line = f"{numbers['records']:,} records -> "
    printed = (reference.parent / "stdout.txt").read_text().splitlines()[-1]
    assert printed.startswith(f"fineweb: {line}") and printed.endswith(f"-> {numbers['tokens']:,} tokens")
    text = run([sys.executable, "-m", "curator_slurm.cli", "status", str(reference)]).stdout
    assert next(x for x in text.splitlines() if x.startswith("workflow:")) == printed.replace(
        "fineweb:", "workflow:", 1
    )


def input_urls(data: dict[str, Any]) -> set[str]:
    """Every response URL of the input WARC files."""
    from support.webfixtures import response_urls

    return {url for p in sorted(data["warcs"].glob("*.warc.gz")) for _, url, _ in response_urls(p)}


def test_four_simulated_array_tasks_from_a_gzipped_paths_list_write_the_same_files(
    data: dict[str, Any], reference: Path, tmp_path: Path
) -> None:
    """As Common Crawl's warc.paths.gz: relative paths, one a line, under --input."""
    listing = tmp_path / "warc.paths.gz"
    names = sorted(p.name for p in data["warcs"].glob("*.warc.gz"))
    listing.write_bytes(gzip.compress("".join(f"{n}\n" for n in names).encode()))
    out = tmp_path / "out"
    args = recipe_args(data, out, "--input-list", str(listing))
    stdout = run([sys.executable, "-m", "curator_slurm.cli", "local", str(FINEWEB), "--shards", "4",
                  "--logs", str(tmp_path / "logs"), "--", *args]).stdout  # fmt: skip
    assert all(f"phase {phase}:" in stdout for phase in PHASES), stdout
    assert results(out) == results(reference)
    assert_tokens_are_the_corpus(out, data["tokenizer"])


@pytest.mark.slurm
def test_real_chained_arrays_write_the_same_files(
    slurm_cluster: str, data: dict[str, Any], reference: Path, tmp_path: Path
) -> None:
    from support.slurmtools import wait_for_job

    out = tmp_path / "out"
    proc = run([sys.executable, "-m", "curator_slurm.cli", "submit", str(FINEWEB), "--shards", "2", "--json", "--",
                *recipe_args(data, out)])  # fmt: skip
    jobs = {name: record["arrays"][0]["job_id"] for name, record in json.loads(proc.stdout).items()}
    assert list(jobs) == PHASES
    for name in PHASES:
        assert set(wait_for_job(jobs[name], timeout=600).values()) == {"COMPLETED"}, name
    assert results(out) == results(reference)
    assert_tokens_are_the_corpus(out, data["tokenizer"])


def test_input_and_output_on_s3_write_the_same_files(data: dict[str, Any], reference: Path, tmp_path: Path) -> None:
    from support.s3tools import endpoint, new_bucket, object_tree, s3_env, upload_tree

    server = endpoint()
    bucket = new_bucket(server)
    upload_tree(server, data["warcs"], bucket, "warcs")
    run([sys.executable, str(FINEWEB), *recipe_args(data, f"s3://{bucket}/out", input_=f"s3://{bucket}/warcs")],
        env=clean_env(s3_env(server)))  # fmt: skip
    tree = object_tree(server, bucket, "out")
    out = tmp_path / "out"
    for key, body in tree.items():
        if not key.startswith(".curator-work/"):
            (out / key).parent.mkdir(parents=True, exist_ok=True)
            (out / key).write_bytes(body)
    assert results(out) == results(reference)
    assert_tokens_are_the_corpus(out, data["tokenizer"])


@pytest.mark.parametrize("script", [FINEWEB, TOKENIZE])
def test_a_bare_tokenizer_json_without_eos_options_is_refused_in_the_scripts_words(
    data: dict[str, Any], tmp_path: Path, script: Path
) -> None:
    out = tmp_path / "out"
    proc = run([sys.executable, str(script), "--input", str(data["warcs"]), "--output", str(out),
                "--tokenizer", str(data["tok"])], check=False)  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--eos-token" in proc.stderr and "--no-eos" in proc.stderr and str(data["tok"]) in proc.stderr
    assert "eod_token" not in proc.stderr and "append_eod" not in proc.stderr
    assert not out.exists(), "no phase ran"
    proc = run([sys.executable, str(script), "--input", str(data["warcs"]), "--output", str(out),
                "--tokenizer", str(tmp_path / "none.json"), "--no-eos"], check=False)  # fmt: skip
    assert proc.returncode == 2 and "--tokenizer" in proc.stderr and "model_identifier" not in proc.stderr
    assert not out.exists()


def test_a_start_with_a_missing_input_leaves_no_workflow_marker(data: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "out"
    missing = tmp_path / "warcs"
    proc = run([sys.executable, str(FINEWEB), *recipe_args(data, out, input_=str(missing))], check=False)
    assert proc.returncode == 2 and str(missing) in proc.stderr
    assert not list(out.rglob("workflow.json")), "no workflow for `status` to show"
    missing.mkdir()
    for p in sorted(data["warcs"].glob("[ab].warc.gz")):
        (missing / p.name).write_bytes(p.read_bytes())
    run([sys.executable, str(FINEWEB), *recipe_args(data, out, "--no-dedup", input_=str(missing))])
    marker = json.loads((out / ".curator-work" / ".curator-run" / "workflow.json").read_text())
    assert marker["phases"] == ["base", "pii", "tokenize", "merge"]
    assert_tokens_are_the_corpus(out, data["tokenizer"])


def test_compressed_output_holds_the_same_documents_and_tokens(
    data: dict[str, Any], reference: Path, tmp_path: Path
) -> None:
    """--compression gzip: every JSONL file of the recipe (corpus, exclusions, intermediates) is .jsonl.gz,
    the documents are those of the plain run (each naming its WARC file), and the token files are the same."""
    out = tmp_path / "out"
    run([sys.executable, str(FINEWEB), *recipe_args(data, out, "--compression", "gzip")])
    written = [p for p in out.rglob("*.jsonl") if ".curator-run" not in p.parts]  # ledgers are the run's own
    assert not written, f"every JSONL file is compressed: {written}"

    def rows(root: Path, pattern: str, opener: Any) -> list[dict[str, Any]]:
        return [json.loads(line) for p in sorted(root.glob(pattern)) for line in opener(p).splitlines()]

    plain = rows(reference, "*.jsonl", lambda p: p.read_text())
    packed = rows(out, "*.jsonl.gz", lambda p: gzip.decompress(p.read_bytes()).decode())
    assert sorted(packed, key=json.dumps) == sorted(plain, key=json.dumps) and packed
    warcs = {p.name for p in data["warcs"].glob("*.warc.gz")}
    assert {r["file_path"] for r in packed} <= warcs
    for step in STEPS:  # a duplicate names its survivor's file: the base phase's, compressed here
        got = rows(out / "removed", f"{step}/*.jsonl.gz", lambda p: gzip.decompress(p.read_bytes()).decode())
        for r in got:
            if "survivor_path" in r:
                assert r["survivor_path"].endswith(".jsonl.gz")
                r["survivor_path"] = r["survivor_path"].removesuffix(".gz")
        want = rows(reference / "removed", f"{step}/*.jsonl", lambda p: p.read_text())
        assert sorted(got, key=json.dumps) == sorted(want, key=json.dumps), step
    assert {k: v for k, v in results(out).items() if k.startswith("megatron/")} == {
        k: v for k, v in results(reference).items() if k.startswith("megatron/")
    }

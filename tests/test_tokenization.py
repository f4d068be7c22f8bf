"""examples/tokenize_corpus.py, the tokenize + merge workflow: every document once, as its encoding plus EOS, in
the stated order; the same files unsharded, as 4 simulated array tasks, after kill -9 mid-phase, and as real
Slurm arrays; merge parts of about N tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm.runs.ledger import iter_records
from curator_slurm.samples.corpus import make_corpus
from support.helpers import REPO, clean_env, kill_when_recorded
from support.megatron_files import EOT, corpus_texts, pairs, sequences_of, train_tokenizer

pytest.importorskip("tokenizers")

SCRIPT = REPO / "examples" / "tokenize_corpus.py"
MERGE_TOKENS = 20_000


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    """A sample corpus of 16 files, and a BPE tokenizer trained on it."""
    root = tmp_path_factory.mktemp("tokcorpus")
    make_corpus(str(root / "in"), files=16, docs_per_file=40, seed=3)
    tokenizer = train_tokenizer(root / "tokenizer.json", list(corpus_texts(root / "in")), vocab_size=800)
    return root / "in", root / "tokenizer.json", tokenizer


def args(setup: tuple[Path, Path, object], out: Path, *extra: str) -> list[str]:
    data, tok, _ = setup
    return ["--input", str(data), "--output", str(out), "--tokenizer", str(tok), "--eos-token", EOT, *extra]


def run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def token_files(out: Path) -> dict[str, bytes]:
    """The merged parts and the per-task pairs, by relative path (temporaries and run directories left out)."""
    found = [*out.glob("*.bin"), *out.glob("*.idx"), *(out / ".curator-work" / "tokens").glob("*")]
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(found) if not p.name.startswith(".")}


@pytest.fixture(scope="module")
def reference(setup: tuple[Path, Path, object], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "out"
    run([sys.executable, str(SCRIPT), *args(setup, out, "--merge-tokens", str(MERGE_TOKENS), "--workers", "2")])
    return out


def expected_documents(data: Path, tokenizer: object) -> list[list[int]]:
    eos = tokenizer.token_to_id(EOT)  # type: ignore[attr-defined]
    return [[*tokenizer.encode(t, add_special_tokens=False).ids, eos] for t in corpus_texts(data)]  # type: ignore


def test_merge_keeps_every_document_once_in_the_stated_order(setup: tuple, reference: Path) -> None:
    data, _, tokenizer = setup
    per_task = [sequences_of(p) for p in pairs(reference / ".curator-work" / "tokens")]
    assert len(per_task) == 16
    in_order = [s for task in per_task for s in task]  # the stated order: pairs by name, documents as read
    assert sorted(in_order) == sorted(expected_documents(data, tokenizer))  # every document once
    parts = pairs(reference)
    assert [p.name for p in parts] == [f"part_{i:05d}" for i in range(len(parts))]
    merged = [sequences_of(p) for p in parts]
    assert [s for part in merged for s in part] == in_order
    # Parts are runs of whole pairs, each closed as soon as it reaches MERGE_TOKENS tokens.
    sizes = [sum(len(s) for s in task) for task in per_task]
    bounds, tokens = [], 0
    for i, size in enumerate(sizes):
        tokens += size
        if tokens >= MERGE_TOKENS or i == len(sizes) - 1:
            bounds.append(i + 1)
            tokens = 0
    starts = [0, *bounds[:-1]]
    assert [sum(len(task) for task in per_task[a:b]) for a, b in zip(starts, bounds, strict=True)] == [
        len(part) for part in merged
    ]
    assert 2 < len(parts) < 16


def test_without_merge_tokens_one_file(setup: tuple, reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "one"
    run([sys.executable, str(SCRIPT), *args(setup, out, "--workers", "1")])
    assert [p.name for p in pairs(out)] == ["part_00000"]
    per_task = [s for p in pairs(reference / ".curator-work" / "tokens") for s in sequences_of(p)]
    assert sequences_of(out / "part_00000") == per_task


def test_four_simulated_array_tasks_write_the_same_bytes(setup: tuple, reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    stdout = run([sys.executable, "-m", "curator_slurm.cli", "local", str(SCRIPT), "--shards", "4",
                  "--logs", str(tmp_path / "logs"), "--", *args(setup, out, "--merge-tokens", str(MERGE_TOKENS),
                  "--merge-tasks", "3")])  # fmt: skip
    assert "phase tokenize:" in stdout and "phase merge:" in stdout
    assert token_files(out) == token_files(reference)
    shards = {r["shard"] for r in iter_records(str(out / ".curator-work" / ".curator-run" / "tokenize"))}
    assert shards == {"0/4", "1/4", "2/4", "3/4"}
    status = run([sys.executable, "-m", "curator_slurm.cli", "status", str(out / ".curator-work" / ".curator-run")])
    total = sum(len(s) for p in pairs(out) for s in sequences_of(p))
    assert status.count(f"tokens: {total} in the outputs of the done source tasks") == 2  # both phases


@pytest.mark.parametrize(("phase", "tasks"), [("tokenize", 16), ("merge", 12)])
def test_kill_9_mid_phase_then_rerun_gives_the_same_bytes(
    setup: tuple, reference: Path, tmp_path: Path, phase: str, tasks: int
) -> None:
    out = tmp_path / "out"
    ref = tmp_path / "ref"
    extra = ("--merge-tokens", "4000", "--merge-tasks", "12", "--workers", "1")
    cmd = [sys.executable, str(SCRIPT), *args(setup, out, *extra)]
    run([sys.executable, str(SCRIPT), *args(setup, ref, *extra)])
    runs = out / ".curator-work" / ".curator-run"
    kill_when_recorded(cmd, runs / phase / "ledger", timeout=300, window=1)
    done = sum(r["status"] == "done" for r in iter_records(str(runs / phase)))
    assert 0 < done < tasks, f"killed in the middle of the {phase} phase ({done} of {tasks} done)"
    tokenized = len(list(iter_records(str(runs / "tokenize"))))
    run(cmd)
    if phase == "merge":
        assert len(list(iter_records(str(runs / "tokenize")))) == tokenized, "no tokenize work redone"
    assert token_files(out) == token_files(ref)
    assert len(pairs(out)) > 12  # several parts per merge task


@pytest.mark.slurm
def test_real_arrays_write_what_a_local_run_writes(
    slurm_cluster: str, setup: tuple, reference: Path, tmp_path: Path
) -> None:
    from support.slurmtools import wait_for_job

    out = tmp_path / "out"
    proc = run([sys.executable, "-m", "curator_slurm.cli", "submit", str(SCRIPT), "--shards", "4",
                "--phase-shards", "merge=2", "--json", "--",
                *args(setup, out, "--merge-tokens", str(MERGE_TOKENS), "--merge-tasks", "2")])  # fmt: skip
    jobs = {name: record["arrays"][0]["job_id"] for name, record in json.loads(proc).items()}
    assert list(jobs) == ["tokenize", "merge"]
    for name, job in jobs.items():
        assert set(wait_for_job(job, timeout=600).values()) == {"COMPLETED"}, name
    assert token_files(out) == token_files(reference)


def test_a_workflow_output_is_read_as_jsonl_whatever_its_hidden_work_directory_holds(
    setup: tuple[Path, Path, object], tmp_path: Path
) -> None:
    """A FineWeb or dedup output holds JSONL beside a hidden `.curator-work` full of Parquet shuffle files: the
    script reads what the readers would list (the JSONL), not the hidden files, and tokenizes every document."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    data, tok, tokenizer = setup
    corpus = tmp_path / "corpus"
    shutil.copytree(data, corpus)
    (corpus / ".curator-work" / "buckets").mkdir(parents=True)
    pq.write_table(pa.table({"key": [1, 2]}), corpus / ".curator-work" / "buckets" / "part-0.parquet")
    out = tmp_path / "out"
    run([sys.executable, str(SCRIPT), "--input", str(corpus), "--output", str(out), "--tokenizer", str(tok),
         "--eos-token", EOT, "--workers", "1"])  # fmt: skip
    got = [s for p in pairs(out) for s in sequences_of(p)]
    assert sorted(got) == sorted(expected_documents(data, tokenizer))

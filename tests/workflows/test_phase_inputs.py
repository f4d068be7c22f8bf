"""A phase consumes exactly what the phase before it recorded: an intermediate file deleted or changed between
phases is refused (naming it and what to run), `status --verify` says so, and a re-run redoes exactly what
depends on it, ending with the output of a fresh run, for any deletions (a property test)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_slurm import LocalExecutor
from curator_slurm.runs.upstream import PhaseInputsError
from curator_slurm.settings import RunOptions
from curator_slurm.stages import JsonlReader, ParquetWriter
from curator_slurm.workflows.dedup.exact import ExactDuplicates
from curator_slurm.workflows.dedup.fuzzy import FuzzyDuplicates
from support.dupcorpus import make_dup_corpus
from support.helpers import REPO, clean_env

DEDUP = REPO / "examples" / "dedup.py"


def exact(data: Path, out: Path) -> ExactDuplicates:
    return ExactDuplicates(JsonlReader(data), ParquetWriter(out), id_field="id", buckets=5)


def kept(out: Path) -> dict[str, list[str]]:
    """Each output file's ids, by file name (the output a fresh run must give, file for file)."""
    return {p.name: pq.read_table(p).column("id").to_pylist() for p in sorted(out.glob("*.parquet"))}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dups")
    make_dup_corpus(root, files=6, docs=30)
    return root


@pytest.fixture(scope="module")
def fresh(data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    out = tmp_path_factory.mktemp("fresh") / "out"
    exact(data, out).run(LocalExecutor(workers=1), options=RunOptions())
    return kept(out)


def script(phase: str | None, data: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """examples/dedup.py as an array task of ``phase`` runs it (``CURATOR_PHASE``), or whole (None)."""
    env = clean_env({"CURATOR_PHASE": phase} if phase else None)
    cmd = [sys.executable, str(DEDUP), "--input", str(data), "--output", str(out), "--buckets", "5", "--id-field", "id"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "curator_slurm.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=600)


@pytest.mark.parametrize(
    ("deleted_after", "intermediate", "next_phase"),
    [("hash", "shuffle/hash", "find"), ("find", "duplicates", "write")],
    ids=["bucket-file-after-hash", "duplicate-list-after-find"],
)
def test_a_phase_refuses_a_deleted_intermediate_file_then_a_rerun_gives_the_fresh_output(
    data: Path, fresh: dict[str, list[str]], tmp_path: Path, deleted_after: str, intermediate: str, next_phase: str
) -> None:
    out = tmp_path / "out"
    phases = ["hash", "find", "write"]
    for phase in phases[: phases.index(deleted_after) + 1]:
        assert script(phase, data, out).returncode == 0
    victim = sorted((out / ".curator-work" / intermediate).glob("*.parquet"))[0]
    victim.unlink()

    refused = script(next_phase, data, out)
    assert refused.returncode != 0
    assert f"phase {deleted_after!r} recorded are gone or changed" in refused.stderr, refused.stderr[-3000:]
    assert f"{victim}: missing" in refused.stderr and "Run the script again" in refused.stderr
    root = out / ".curator-work" / ".curator-run"
    assert not (root / next_phase / "ledger").exists(), "the refused phase did no work"

    verify = cli("status", str(root), "--verify")
    assert verify.returncode == 1, verify.stdout
    assert "verified:" not in verify.stdout.split(f"== phase {deleted_after}")[1].split("== phase")[0]
    assert f"{victim}: missing" in verify.stdout

    assert script(None, data, out).returncode == 0
    assert kept(out) == fresh
    again = cli("status", str(root), "--verify")
    assert again.returncode == 0 and again.stdout.count("verified:") == 3, again.stdout


def test_an_output_deleted_after_the_whole_run_redoes_the_phases_after_it(
    data: Path, fresh: dict[str, list[str]], tmp_path: Path
) -> None:
    """A duplicate list deleted after everything ran: the re-run redoes that find task, so every write task
    (each reads every list) is done again from the redone list, never from a partial one."""
    out = tmp_path / "out"
    wf = exact(data, out)
    wf.run(LocalExecutor(workers=1), options=RunOptions())
    sorted((out / ".curator-work" / "duplicates").glob("*.parquet"))[0].unlink()
    result = exact(data, out).run(LocalExecutor(workers=1), options=RunOptions())
    assert result.phases["find"].done == 1
    assert result.phases["write"].done == result.phases["write"].source_tasks_mine
    assert kept(out) == fresh


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stop_after=st.sampled_from(["hash", "find", "write"]),
    picks=st.lists(st.tuples(st.sampled_from(["shuffle/hash", "duplicates", "out"]), st.integers(0, 99)), max_size=4),
    resize=st.booleans(),
)
def test_any_intermediate_files_deleted_or_changed_never_change_a_reruns_output(
    data: Path, fresh: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory, stop_after: str, picks, resize
) -> None:
    out = tmp_path_factory.mktemp("prop") / "out"
    wf = exact(data, out)
    for phase in ["hash", "find", "write"][: ["hash", "find", "write"].index(stop_after) + 1]:
        wf.run(LocalExecutor(workers=1), options=RunOptions(phase=phase))
    for where, k in picks:
        directory = out if where == "out" else out / ".curator-work" / where
        files = sorted(directory.glob("*.parquet"))
        if not files:
            continue
        victim = files[k % len(files)]
        if resize:  # changed, not gone: a truncated copy (a failed copy, a full disk)
            victim.write_bytes(victim.read_bytes()[: max(1, victim.stat().st_size // 2)])
        else:
            victim.unlink()
    exact(data, out).run(LocalExecutor(workers=1), options=RunOptions())
    assert kept(out) == fresh


@pytest.mark.parametrize("added", ["a/00-first.jsonl", "b/zz-last.jsonl"], ids=["before-others", "after-all"])
def test_accepted_new_inputs_redo_the_bucket_phases_and_the_status_tells_the_truth(
    data: Path, tmp_path: Path, added: str
) -> None:
    """A file added after a complete run, accepted with CURATOR_ACCEPT_NEW_INPUTS: the find tasks (whose ids do
    not depend on the inputs) and every write task are done again from the new hash phase, and a file added
    before others in the listing moves their documents' positions, so their hash tasks are done again too; the
    output is that of a fresh run over the new input set, and status counts only current tasks (never over
    100 %)."""
    mine = tmp_path / "in"
    shutil.copytree(data, mine)
    out = tmp_path / "out"
    exact(mine, out).run(LocalExecutor(workers=1), options=RunOptions())
    before = sum(len(ids) for ids in kept(out).values())
    copies = [json.loads(line) for line in next(mine.rglob("*.jsonl")).read_text().splitlines()]
    (mine / added).write_text("".join(json.dumps({**r, "id": f"new-{i}"}) + "\n" for i, r in enumerate(copies)))
    with pytest.raises(Exception, match="inputs changed"):
        exact(mine, out).run(LocalExecutor(workers=1), options=RunOptions())
    exact(mine, out).run(LocalExecutor(workers=1), options=RunOptions(accept_new_inputs=True))

    reference = tmp_path / "reference"
    exact(mine, reference).run(LocalExecutor(workers=1), options=RunOptions())
    assert kept(out) == kept(reference)
    assert sum(len(ids) for ids in kept(out).values()) == before, "copies add no document: one of each survives"
    status = cli("status", str(out / ".curator-work" / ".curator-run"), "--json")
    phases = json.loads(status.stdout)
    for name, phase in (phases.get("phases") or phases).items():
        assert phase["done"] <= phase["total"] and phase["percent"] <= 100.0, (name, phase)


def test_fuzzy_components_refuse_a_lost_edge_file(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    wf = FuzzyDuplicates(JsonlReader(data), ParquetWriter(out), buckets=4, jaccard_threshold=0.5)
    for phase in ("signatures", "candidates"):
        wf.run(LocalExecutor(workers=1), options=RunOptions(phase=phase))
    edges = sorted((out / ".curator-work" / "edges").glob("*.parquet"))
    assert edges, "the corpus has candidate pairs"
    os.unlink(edges[-1])
    with pytest.raises(PhaseInputsError, match="phase 'candidates' recorded are gone"):
        wf.run(LocalExecutor(workers=1), options=RunOptions(phase="components"))


def test_accepted_new_inputs_reach_the_merged_token_files(tmp_path: Path, corpus: Path) -> None:
    """The merge phase's task ids do not depend on the inputs: with a file added and accepted, its tokenize
    pair is new and the merge is done again from every pair, so the part holds every document."""
    from curator_slurm.stages.io.megatron import MegatronTokenizerWriter
    from curator_slurm.workflows.tokenization import MegatronTokenization
    from support.megatron_files import corpus_texts, read_megatron, train_tokenizer

    data = tmp_path / "in"
    shutil.copytree(corpus, data)
    tokenizer = tmp_path / "tokenizer.json"
    train_tokenizer(tokenizer, list(corpus_texts(data)), vocab_size=600)

    def workflow() -> MegatronTokenization:
        writer = MegatronTokenizerWriter(tmp_path / "pairs", str(tokenizer), append_eod=False)
        return MegatronTokenization(JsonlReader(data), writer, tmp_path / "tokens")

    workflow().run(LocalExecutor(workers=1), options=RunOptions())
    shutil.copy(next(data.glob("*.jsonl")), data / "zz-added.jsonl")
    workflow().run(LocalExecutor(workers=1), options=RunOptions(accept_new_inputs=True))
    merged = read_megatron(tmp_path / "tokens" / "part_00000")
    assert len(merged["document_index"]) - 1 == sum(1 for _ in corpus_texts(data))

"""The run fingerprint is a function of the pipeline's meaning (issue 24 item 3, issue 25 item 4): the same in
every process and hash seed (sets and dicts canonical, nested filters taken apart), a value without a stable
form refused naming the stage and attribute, a stage identified by its name and parameters rather than its
module, an old run directory refused naming the scheme change, and a refused Slurm task saying why."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from curator_slurm import FingerprintError, LocalExecutor, Pipeline, ShardSpec
from curator_slurm.errors import RunDirError
from curator_slurm.pipeline import fingerprint_params
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME, fingerprint_digest, load_refusals
from curator_slurm.stages import (
    DocumentFilter,
    FilePartitioningStage,
    JsonlReader,
    ParquetWriter,
    ProcessingStage,
    ScoreFilter,
)
from curator_slurm.tasks import DocumentBatch
from support.helpers import REPO, clean_env, read_tree

NEMO_STYLE = REPO / "tests" / "pipelines" / "nemo_style.py"


def run_nemo_style(corpus: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, str(NEMO_STYLE), "--input", str(corpus), "--output", str(out)],
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_four_shards_under_four_hash_seeds_equal_the_unsharded_run(corpus: Path, tmp_path: Path) -> None:
    """A filter holding a set in a private attribute, as NeMo's tutorials write them: each shard runs
    under another PYTHONHASHSEED, so each iterates the set in another order, and all four agree."""
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    run_nemo_style(corpus, single, {"PYTHONHASHSEED": "0"})
    orders = set()
    for index in range(4):
        env = {"PYTHONHASHSEED": str(index + 1), "CURATOR_NUM_SHARDS": "4", "CURATOR_SHARD_INDEX": str(index)}
        proc = run_nemo_style(corpus, sharded, env)
        orders.add(re.search(r"set order: (.*)", proc.stderr).group(1))  # type: ignore[union-attr]
        assert f"shard {index}/4: kept " in proc.stderr
    assert len(orders) > 1, "the seeds must really iterate the set differently for this test to mean anything"
    assert read_tree(sharded) == read_tree(single)
    assert len(load_status(str(sharded / DEFAULT_RUN_DIR_NAME)).done) == 12


class Blocked(DocumentFilter):
    def __init__(self, words: list[str], weights: dict[str, float] | None = None) -> None:
        self._blocked = set(words)
        self._weights = dict(weights or {})

    def score_document(self, text: str) -> bool:
        return not any(w in self._blocked for w in text.split())

    def keep_document(self, score: bool) -> bool:
        return score


def test_sets_dicts_and_nested_filters_are_canonical() -> None:
    one = ScoreFilter(Blocked(["c", "a", "b"], {"y": 1.0, "x": 2.0}))
    same = ScoreFilter(Blocked(["b", "c", "a"], {"x": 2.0, "y": 1.0}))
    other = ScoreFilter(Blocked(["a", "b"], {"x": 2.0, "y": 1.0}))
    assert fingerprint_params(one) == fingerprint_params(same)
    assert fingerprint_params(one) != fingerprint_params(other)
    described = fingerprint_params(one)["filter_obj"]
    # A DocumentFilter is a stage: held by another, it is described by its declared name and its params().
    assert described == {
        "stage": "blocked",
        "params": {"_blocked": ["a", "b", "c"], "_weights": {"x": 2.0, "y": 1.0}},
    }
    json.dumps(described)  # plain JSON


class Holds(ProcessingStage[DocumentBatch, DocumentBatch]):
    """A stage holding another stage: described by that stage's name and its own params()."""

    def __init__(self, inner: ProcessingStage) -> None:
        self._inner = inner

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return task


def test_a_nested_stage_is_described_by_its_name_and_its_own_params() -> None:
    here = Holds(FilePartitioningStage("/data/here", files_per_partition=2))
    moved = Holds(FilePartitioningStage("/mnt/elsewhere", files_per_partition=2))  # params() leaves the path out
    other = Holds(FilePartitioningStage("/data/here", files_per_partition=3))
    assert fingerprint_params(here) == fingerprint_params(moved)
    assert fingerprint_params(here) != fingerprint_params(other)
    assert fingerprint_params(here)["_inner"]["stage"] == "file_partitioning"


class Loads(ProcessingStage[DocumentBatch, DocumentBatch]):
    """A stage that leaves its loaded model out of what workers receive (``__getstate__``)."""

    def __init__(self, threshold: float) -> None:
        self._threshold = threshold
        self._model = threading.Lock()  # a loaded resource: not canonical

    def __getstate__(self) -> dict[str, object]:
        return {"_threshold": self._threshold, "_model": None}

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return task


def test_a_stage_with_getstate_is_fingerprinted_by_what_it_returns() -> None:
    """Under every supported Python (3.10's ``object`` has no ``__getstate__`` to compare with)."""
    assert fingerprint_params(Loads(0.5)) == {"_model": None, "_threshold": 0.5}
    assert fingerprint_params(Loads(0.5)) != fingerprint_params(Loads(0.7))


def test_a_large_set_is_recorded_by_digest_and_a_change_in_it_is_refused(corpus: Path, tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(50_000)]
    out = tmp_path / "out"

    def pipeline(vocabulary: list[str]) -> Pipeline:
        return (
            Pipeline("big")
            .add_stage(JsonlReader(str(corpus)))
            .add_stage(ScoreFilter(Blocked(vocabulary)))
            .add_stage(ParquetWriter(out))
        )

    pipeline(words).run(LocalExecutor(workers=1), ShardSpec.explicit(0, 2))
    run_json = out / DEFAULT_RUN_DIR_NAME / "run.json"
    assert run_json.stat().st_size < 10_000, "a 50,000-word set is not written out word by word"
    with pytest.raises(
        RunDirError,
        match=r"stage 2 'score_filter\[blocked\]': filter_obj was blocked\(_blocked='<set of 50000 items, xxh64 \w+>', "
        r"_weights=\{\}\), now .* \(they differ at filter_obj._blocked: '<set of 50000 items",
    ):
        pipeline([*words[:-1], "changed"]).run(LocalExecutor(workers=1), ShardSpec.explicit(1, 2))
    pipeline(list(reversed(words))).run(LocalExecutor(workers=1), ShardSpec.explicit(1, 2))  # same set: resumes
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == 12


class Locked(ProcessingStage[DocumentBatch, DocumentBatch]):
    def __init__(self) -> None:
        self._lock = threading.Lock()

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return task


def test_a_value_without_a_stable_form_is_refused_before_any_work(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pipeline = Pipeline("locked").add_stage(JsonlReader(str(corpus))).add_stage(Locked()).add_stage(ParquetWriter(out))
    with pytest.raises(FingerprintError) as caught:
        pipeline.run(LocalExecutor(workers=1))
    message = str(caught.value)
    assert message.startswith("stage 'locked' (Locked) attribute _lock holds <unlocked _thread.lock")
    assert "load models and other resources in setup()" in message and "fingerprint_exclude" in message
    assert not out.exists(), "refused before any work"


class Cached(ProcessingStage[DocumentBatch, DocumentBatch]):
    fingerprint_exclude = frozenset({"_cache"})

    def __init__(self, level: int) -> None:
        self._level = level
        self._cache: object = None

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return task


def test_attributes_in_fingerprint_exclude_are_left_out(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"

    def run(stage: Cached, index: int) -> None:
        pipeline = Pipeline("cached").add_stage(JsonlReader(str(corpus))).add_stage(stage).add_stage(ParquetWriter(out))
        pipeline.run(LocalExecutor(workers=1), ShardSpec.explicit(index, 2))

    run(Cached(1), 0)
    warm = Cached(1)
    warm._cache = threading.Lock()  # a loaded resource: not canonical, and not part of the fingerprint
    run(warm, 1)
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == 12
    assert fingerprint_params(warm) == {"_level": 1}
    with pytest.raises(RunDirError, match=r"_level was 1, now 2"):
        run(Cached(2), 1)


STAGE_MODULE = """
from curator_slurm.stages import ProcessingStage


class Shorten(ProcessingStage):
    def __init__(self, keep):
        self._keep = keep

    def process(self, task):
        return task
"""

MOVED_RUN = """
import sys
sys.path.insert(0, sys.argv[1])
module = __import__(sys.argv[2])
from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.stages import JsonlReader, ParquetWriter

if __name__ == "__main__":
    Pipeline("moved").add_stage(JsonlReader(sys.argv[3])).add_stage(module.Shorten(5)).add_stage(
        ParquetWriter(sys.argv[4])
    ).run(LocalExecutor(workers=1))
"""


def test_a_stage_class_can_move_to_another_module(corpus: Path, tmp_path: Path) -> None:
    """The fingerprint names a stage by its declared name and parameters, not its module path."""
    (tmp_path / "old_place.py").write_text(STAGE_MODULE)
    (tmp_path / "new_place.py").write_text(STAGE_MODULE)
    script, out = tmp_path / "run.py", tmp_path / "out"
    script.write_text(MOVED_RUN)
    for index, module in enumerate(["old_place", "new_place"]):
        env = clean_env({"CURATOR_NUM_SHARDS": "2", "CURATOR_SHARD_INDEX": str(index)})
        cmd = [sys.executable, str(script), str(tmp_path), module, str(corpus), str(out)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == 12


def _pipeline(corpus: Path, out: Path, stage: ProcessingStage) -> Pipeline:
    return Pipeline("fp").add_stage(JsonlReader(str(corpus))).add_stage(stage).add_stage(ParquetWriter(out))


def test_a_run_directory_of_the_old_fingerprint_scheme_is_refused_naming_the_change(
    corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _pipeline(corpus, out, Cached(1)).run(LocalExecutor(workers=1), ShardSpec.explicit(0, 2))
    run_json = out / DEFAULT_RUN_DIR_NAME / "run.json"
    recorded = json.loads(run_json.read_text())["pipeline"]
    # What the version before wrote: no fingerprint_scheme, and each stage's class by its module path.
    old = {k: v for k, v in recorded.items() if k != "fingerprint_scheme"}
    old["stages"] = [{**s, "type": f"somewhere.{s['name']}"} for s in recorded["stages"]]
    run_json.write_text(json.dumps({"fingerprint": fingerprint_digest(old), "pipeline": old}))
    with pytest.raises(RunDirError) as caught:
        _pipeline(corpus, out, Cached(1)).run(LocalExecutor(workers=1), ShardSpec.explicit(1, 2))
    message = str(caught.value)
    assert "written with fingerprint scheme 1 (1: each stage named by its class's module path" in message
    assert "this version uses scheme 2" in message
    assert "use the curator-slurm version that started it" in message and "start afresh" in message


def test_a_slurm_task_refused_by_its_run_directory_records_why(corpus: Path, tmp_path: Path) -> None:
    """What `failures` shows for an array task that ended without recording any work (tests/slurm has the
    command on the real cluster)."""
    out = tmp_path / "out"
    _pipeline(corpus, out, Cached(1)).run(LocalExecutor(workers=1), ShardSpec.explicit(0, 2))
    task = ShardSpec.from_env(
        {
            "SLURM_JOB_ID": "7001",
            "SLURM_ARRAY_JOB_ID": "7000",
            "SLURM_ARRAY_TASK_ID": "1",
            "SLURM_ARRAY_TASK_COUNT": "2",
            "SLURM_ARRAY_TASK_MIN": "0",
            "SLURM_ARRAY_TASK_MAX": "1",
            "SLURM_ARRAY_TASK_STEP": "1",
        }
    )
    with pytest.raises(RunDirError):
        _pipeline(corpus, out, Cached(2)).run(LocalExecutor(workers=1), task)
    refusals = load_refusals(str(out / DEFAULT_RUN_DIR_NAME))
    assert list(refusals) == ["7000_1"]
    error = refusals["7000_1"]["error"]
    assert error.startswith("RunDirError: ") and "belongs to another pipeline" in error
    assert "stage 2 'cached': _level was 1, now 2" in error

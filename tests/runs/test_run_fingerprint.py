"""The run fingerprint sees every parameter that changes the output, private attributes too, and stays
the same across processes for objects without a stable repr (issue 14, item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.errors import RunDirError
from curator_slurm.pipeline import fingerprint_params
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.stages import JsonlReader, ParquetWriter, ProcessingStage
from curator_slurm.tasks import DocumentBatch


class Truncate(ProcessingStage[DocumentBatch, DocumentBatch]):
    """Keeps its parameter as NeMo Curator's stages do, in a private attribute."""

    def __init__(self, max_chars: int) -> None:
        self._max_chars = max_chars

    def process(self, task: DocumentBatch) -> DocumentBatch:
        text = pc.utf8_slice_codeunits(task.data.column("text"), 0, self._max_chars)
        return task.derive(task.data.set_column(task.data.schema.get_field_index("text"), "text", text))


class Tokenizer:
    """An object whose repr holds its memory address: different in every process."""

    def __init__(self, lowercase: bool) -> None:
        self.lowercase = lowercase


class Tokenize(ProcessingStage[DocumentBatch, DocumentBatch]):
    def __init__(self, lowercase: bool) -> None:
        self.tokenizer = Tokenizer(lowercase)

    def process(self, task: DocumentBatch) -> DocumentBatch:
        return task


def _pipeline(corpus: Path, out: Path, stage: ProcessingStage) -> Pipeline:
    return Pipeline("fp").add_stage(JsonlReader(str(corpus))).add_stage(stage).add_stage(ParquetWriter(out))


def test_a_private_parameter_is_in_run_json_and_another_value_is_refused(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _pipeline(corpus, out, Truncate(100)).run(LocalExecutor(workers=1), ShardSpec.explicit(0, 2))
    run = json.loads((out / DEFAULT_RUN_DIR_NAME / "run.json").read_text())
    params = {s["name"]: s["params"] for s in run["pipeline"]["stages"]}
    assert params["truncate"] == {"_max_chars": 100}
    with pytest.raises(RunDirError, match=r"stage \d 'truncate': _max_chars was 100, now 200"):
        _pipeline(corpus, out, Truncate(200)).run(LocalExecutor(workers=1), ShardSpec.explicit(1, 2))
    _pipeline(corpus, out, Truncate(100)).run(LocalExecutor(workers=1), ShardSpec.explicit(1, 2))
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == 12


def test_objects_without_a_stable_repr_are_fingerprinted_by_their_attributes(corpus: Path, tmp_path: Path) -> None:
    assert fingerprint_params(Tokenize(True)) == fingerprint_params(Tokenize(True))
    assert fingerprint_params(Tokenize(True)) != fingerprint_params(Tokenize(False))
    out = tmp_path / "out"
    _pipeline(corpus, out, Tokenize(True)).run(LocalExecutor(workers=1), ShardSpec.explicit(0, 2))
    _pipeline(corpus, out, Tokenize(True)).run(LocalExecutor(workers=1), ShardSpec.explicit(1, 2))  # not refused
    assert len(load_status(str(out / DEFAULT_RUN_DIR_NAME)).done) == 12


def test_a_stage_that_declares_params_is_fingerprinted_by_them() -> None:
    class Declared(Truncate):
        def params(self) -> dict[str, object]:
            return {"max_chars": self._max_chars}

    assert fingerprint_params(Declared(7)) == {"max_chars": 7}

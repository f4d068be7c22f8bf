"""A source stage whose ids change from process to process is named as such, and the error does not
advise accepting new inputs (issue 14, item 3); a source task without an id is a PipelineBuildError."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.errors import PipelineBuildError, RunDirError
from curator_slurm.settings import RunOptions
from curator_slurm.stages import ParquetWriter, ProcessingStage
from curator_slurm.stages.io.readers import JsonlReaderStage
from curator_slurm.tasks import EmptyTask, FileGroupTask
from support.helpers import logged


class UuidSource(ProcessingStage[EmptyTask, FileGroupTask]):
    """One task per file, with an id that is new in every process (the mistake)."""

    def __init__(self, root: Path, explicit_ids: bool = True) -> None:
        self.root = str(root)
        self.explicit_ids = explicit_ids

    def process(self, task: EmptyTask) -> list[FileGroupTask]:
        paths = sorted(str(p) for p in Path(self.root).glob("*.jsonl"))
        return [FileGroupTask(task_id=uuid.uuid4().hex if self.explicit_ids else "", data=[p]) for p in paths]


def _run(corpus: Path, out: Path, shard: ShardSpec, accept: bool = False, explicit_ids: bool = True) -> None:
    Pipeline("uuid").add_stage(UuidSource(corpus, explicit_ids)).add_stage(JsonlReaderStage()).add_stage(
        ParquetWriter(out)
    ).run(LocalExecutor(workers=1), shard, options=RunOptions(accept_new_inputs=accept))


def test_ids_that_change_between_shards_are_called_non_deterministic(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(corpus, out, ShardSpec.explicit(0, 2))
    with pytest.raises(RunDirError) as info:
        _run(corpus, out, ShardSpec.explicit(1, 2))
    message = str(info.value)
    assert "same number of source tasks as the first one (12) but with other ids" in message
    assert "probably does not give deterministic ids" in message and "content_id" in message
    assert "CURATOR_ACCEPT_NEW_INPUTS" not in message
    with logged(logging.WARNING) as warnings:  # an explicit choice to go on is still honoured, with a warning
        _run(corpus, out, ShardSpec.explicit(1, 2), accept=True)
    assert any("probably does not give deterministic ids" in w for w in warnings), warnings


def test_a_source_task_without_an_id_while_sharding_is_a_build_error(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(PipelineBuildError, match="without a deterministic task_id"):
        _run(corpus, tmp_path / "out", ShardSpec.explicit(0, 2), explicit_ids=False)

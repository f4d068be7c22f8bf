"""Scripts pick their executor by name with one library function, ``make_executor``, not a copied if/else."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from curator_slurm import LocalExecutor
from curator_slurm.backends import EXECUTORS, make_executor
from support.executors import requires_ray

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_local_by_name_with_its_workers() -> None:
    executor = make_executor("local", workers=3)
    assert isinstance(executor, LocalExecutor) and executor.workers == 3


@requires_ray
def test_ray_by_name_gets_the_workers_as_its_cpus() -> None:
    from curator_slurm.backends.ray import RayExecutor

    executor = make_executor("ray", workers=2)
    assert isinstance(executor, RayExecutor) and executor.num_cpus == 2


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"executor 'dask': use one of local, ray"):
        make_executor("dask")
    assert EXECUTORS == ("local", "ray")


@pytest.mark.parametrize("example", ["curate.py", "curate_web.py"])
def test_the_examples_offer_the_library_s_executors(example: str) -> None:
    text = (EXAMPLES / example).read_text()
    assert "make_executor(args.executor, workers=args.workers)" in text
    assert "choices=EXECUTORS" in text
    assert "RayExecutor" not in text, "no executor class is chosen by hand"


def test_a_new_executor_is_registered_without_editing_the_framework(corpus: Path, tmp_path: Path) -> None:
    """An executor of the user's own (here: one that does the source tasks in reverse order, in this process)
    registered by name is built by ``make_executor``, offered by ``EXECUTORS``, and runs a real pipeline to the
    same output as the local one, through the same run session (ledger, resume)."""
    from curator_slurm import Pipeline, ShardSpec
    from curator_slurm.backends.registry import _REGISTRY
    from curator_slurm.backends.run import BaseExecutor
    from curator_slurm.runs.ledger import load_status
    from curator_slurm.stages import JsonlReader, ParquetWriter
    from support.helpers import REPO, read_tree

    # docs/writing-stages.md's executor, as printed there.
    markdown = (REPO / "docs" / "writing-stages.md").read_text()
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", markdown, re.S) if "(BaseExecutor)" in b]
    namespace: dict[str, Any] = {}
    exec(compile(code, "writing-stages.md", "exec"), namespace)
    Backwards = namespace["Backwards"]
    try:
        assert "backwards" in EXECUTORS and isinstance(make_executor("backwards"), Backwards)

        def run(executor: BaseExecutor, out: Path) -> None:
            pipeline = Pipeline("p").add_stage(JsonlReader(str(corpus))).add_stage(ParquetWriter(out))
            pipeline.run(executor, shard=ShardSpec.single())

        run(make_executor("backwards"), tmp_path / "mine")
        run(LocalExecutor(workers=1), tmp_path / "local")
        mine, local = read_tree(tmp_path / "mine"), read_tree(tmp_path / "local")
        assert {k: v for k, v in mine.items() if ".curator-run" not in k} == {
            k: v for k, v in local.items() if ".curator-run" not in k
        }
        assert len(load_status(str(tmp_path / "mine" / ".curator-run")).done) == 12
    finally:
        _REGISTRY.pop("backwards", None)

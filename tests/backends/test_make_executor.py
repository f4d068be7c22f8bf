"""Scripts pick their executor by name with one library function, ``make_executor``, not a copied if/else."""

from __future__ import annotations

from pathlib import Path

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

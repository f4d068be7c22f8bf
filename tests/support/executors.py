"""The executors that behaviour tests run against, as fixtures.

A test that takes ``executor_factory`` runs once per executor: LocalExecutor always, RayExecutor when
Ray can be imported (skipped with a reason otherwise). Ray is started once per test session, in this
process, and every RayExecutor uses it (an executor uses an already initialised Ray instead of starting
its own and leaves it running), so a Ray test pays for its actors' start-up, not for a whole cluster.
Import the fixtures into a test module to use them (they are registered under the names
``ray_cluster`` and ``executor_factory``; the functions are named apart so that tests taking those
arguments do not shadow an import)::

    from support.executors import executor_factory_fixture, ray_cluster_fixture  # noqa: F401
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from curator_slurm import LocalExecutor
from curator_slurm.backends.run import BaseExecutor

HAVE_RAY = importlib.util.find_spec("ray") is not None
NO_RAY = "ray is not installed (pip install ray): RayExecutor tests skipped"
requires_ray = pytest.mark.skipif(not HAVE_RAY, reason=NO_RAY)

#: ``factory(workers=..., retry_backoff=...)``: an executor of the kind the test is parametrised with.
ExecutorFactory = Callable[..., BaseExecutor]

#: CPUs of the session's Ray, whatever the machine: the number of actors (and so the start-up time)
#: of every Ray test stays the same on a laptop and on a 2-core CI runner.
RAY_TEST_CPUS = 2


@pytest.fixture(scope="session", name="ray_cluster")
def ray_cluster_fixture() -> Iterator[str]:
    """A local Ray for the whole session, started in this process; yields its address, which a
    subprocess joins through ``RAY_ADDRESS``."""
    if not HAVE_RAY:
        pytest.skip(NO_RAY)
    import ray

    if ray.is_initialized():  # started by someone else: use it, leave it
        yield ray.get_runtime_context().gcs_address
        return
    temp_dir = f"/tmp/curator-ray-test-{os.getpid()}"  # short: Ray's socket paths must stay < 107 chars
    # ray.init makes SIGTERM exit this process; pytest (and the stop-signal tests) keep their own handler.
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    ray.init(
        num_cpus=RAY_TEST_CPUS,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
        _temp_dir=temp_dir,
    )
    for sig, handler in saved.items():
        signal.signal(sig, handler)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


def ship_test_module(module: Any) -> None:
    """Let Ray workers unpickle the stages a test module defines, and the shared ones it may use: their
    directory is not on the workers' ``sys.path``, so their classes are sent by value instead of by reference."""
    from ray import cloudpickle

    from support import shared_stages

    cloudpickle.register_pickle_by_value(module)
    cloudpickle.register_pickle_by_value(shared_stages)


@pytest.fixture(params=["local", pytest.param("ray", marks=requires_ray)], name="executor_factory")
def executor_factory_fixture(request: pytest.FixtureRequest) -> ExecutorFactory:
    """Makes executors of one kind; ``workers`` is LocalExecutor's pool size and caps every Ray pool."""
    if request.param == "local":

        def local(workers: int = 1, retry_backoff: float = 0.001) -> BaseExecutor:
            return LocalExecutor(workers=workers, retry_backoff=retry_backoff)

        return local

    request.getfixturevalue("ray_cluster")
    ship_test_module(request.module)
    from curator_slurm.backends.ray import RayExecutor

    def on_ray(workers: int | None = None, retry_backoff: float = 0.001) -> BaseExecutor:
        return RayExecutor(max_actors_per_stage=workers, retry_backoff=retry_backoff)

    return on_ray

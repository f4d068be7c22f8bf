from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from curator_slurm.samples.corpus import make_corpus
from support.executors import executor_factory_fixture, ray_cluster_fixture  # noqa: F401 - fixtures for every test module


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small JSONL corpus: 12 files of 60 documents, about a fifth too short for the demo filter.
    Session-scoped and read-only: tests that damage inputs make their own copy."""
    root = tmp_path_factory.mktemp("corpus")
    make_corpus(str(root), files=12, docs_per_file=60, seed=1)
    return root


REQUIRE_SLURM = os.environ.get("CURATOR_REQUIRE_SLURM") == "1"


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The real single-node cluster (scripts/slurm-up.sh). Without one the test skips, unless
    CURATOR_REQUIRE_SLURM=1 (as in CI), where a missing cluster is a failure."""
    from support.slurmtools import cluster_available

    ok, why = cluster_available()
    if not ok:
        if REQUIRE_SLURM:
            pytest.fail(f"CURATOR_REQUIRE_SLURM=1 but {why}; start it with scripts/slurm-up.sh")
        pytest.skip(f"{why}; start a cluster with scripts/slurm-up.sh (as root) to run this test")
    return why


MULTINODE_STATE = os.environ.get("CURATOR_SLURM_MN_STATE", "/var/tmp/curator-slurm-mn")


@pytest.fixture
def multinode_cluster(monkeypatch: pytest.MonkeyPatch) -> str:
    """The real 3-node cluster of scripts/slurm-multinode-up.sh, selected for this test by SLURM_CONF
    (so the Slurm commands of the test and of what it starts use it); returns that config's path.
    Skips without it, unless CURATOR_REQUIRE_SLURM=1 (as in CI), where a missing cluster is a failure."""
    from support.slurmtools import cluster_available

    conf = os.path.join(MULTINODE_STATE, "slurm.conf")
    monkeypatch.setenv("SLURM_CONF", conf)
    ok, why = cluster_available(min_nodes=3) if os.path.isfile(conf) else (False, f"no {conf}")
    if not ok:
        if REQUIRE_SLURM:
            pytest.fail(f"CURATOR_REQUIRE_SLURM=1 but the multi-node cluster is missing ({why}); start it with "
                        "scripts/slurm-multinode-up.sh")  # fmt: skip
        pytest.skip(f"multi-node cluster missing ({why}); start it with scripts/slurm-multinode-up.sh (as root)")
    return conf


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With CURATOR_REQUIRE_SLURM=1 a skipped Slurm test counts as failed, whatever skipped it."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_SLURM and report.skipped and item.get_closest_marker("slurm") is not None:
        report.outcome = "failed"
        report.longrepr = f"Slurm test skipped while CURATOR_REQUIRE_SLURM=1: {report.longrepr}"

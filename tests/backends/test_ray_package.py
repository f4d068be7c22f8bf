"""backends/ray is a package whose planning needs no Ray: a machine without Ray can import the executor
(Ray is imported only when a run starts) and size pools."""

from __future__ import annotations

import subprocess
import sys

from support.helpers import clean_env


def test_the_ray_package_and_its_planning_import_without_ray() -> None:
    code = (
        "import sys\n"
        "from curator_slurm.backends.ray import RayExecutor, RayNodesMissingError, fuse_stages, plan_pools\n"
        "from curator_slurm.stages import JsonlReader, ParquetWriter, Resources\n"
        "groups = fuse_stages([JsonlReader('in'), ParquetWriter('out').with_(resources=Resources(cpus=2))])\n"
        "plans = plan_pools(groups, cluster_cpus=8)\n"
        "print([(g.name, p.actors, p.num_cpus) for g, p in zip(groups, plans)], 'ray' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("]")[-1].strip() == "False", done.stdout  # Ray was not imported
    assert "('parquet_writer', 4, " in done.stdout  # a 2-CPU stage on 8 CPUs: 4 actors

"""Rows 9a-9c: RayExecutor against LocalExecutor, fused and per stage, and Ray's start-up."""

from __future__ import annotations

import statistics

from curator_slurm import LocalExecutor

from ..context import Bench
from ..demo import curate_cmd, run_demo_job
from ..harness import BenchError, Measure, Row, available_cores, fresh_dir, progress, rotated, run_child


def bench_ray(b: Bench) -> list[Row]:
    """Row 9: RayExecutor on the demo job vs LocalExecutor(workers=all CPUs), Ray's start-up excluded,
    with its stages fused into one pool (the default) and with a pool per stage; and what Ray's
    start-up costs."""
    try:
        import ray
    except ImportError:
        raise BenchError("ray is not installed") from None
    from curator_slurm.backends.ray import RayExecutor

    corpus = b.corpus("base")
    cores = available_cores()
    ray_dps: dict[str, list[float]] = {"ray": [], "ray-per-stage": []}
    local_dps: list[float] = []
    startup: list[float] = []
    local_walls: list[float] = []
    progress("row 9: starting Ray (untimed here; timed below from a fresh process)")
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        with fresh_dir(b.out("ray-warm")) as out:
            run_demo_job(RayExecutor(), corpus, out)
        for rep in range(b.repeat):
            for name in rotated(["ray", "local", "ray-per-stage"], rep):
                progress(f"row 9: {name}, repeat {rep + 1}/{b.repeat}")
                with fresh_dir(b.out(f"ray-{name}")) as out:
                    if name in ray_dps:
                        executor = RayExecutor(fuse=name == "ray")
                        run = run_demo_job(executor, corpus, out)
                        working = run.seconds - executor.ray_seconds - executor.actor_seconds
                        ray_dps[name].append(run.docs_in / working)
                    else:
                        local_dps.append(run_demo_job(LocalExecutor(workers=cores), corpus, out).docs_per_s)
    finally:
        ray.shutdown()
    one = b.corpus("one-file")
    b.warm_children()
    for rep in range(b.repeat):
        progress(f"row 9b: curate.py --executor ray on one file, repeat {rep + 1}/{b.repeat}")
        with fresh_dir(b.out("ray-start")) as out:
            ray_run = run_child([*curate_cmd(one.path, out), "--executor", "ray"])
        with fresh_dir(b.out("local-start")) as out:
            local_run = run_child(curate_cmd(one.path, out))
        startup.append(ray_run.wall - local_run.wall)
        local_walls.append(local_run.wall)
    return [
        Row("9a", f"demo job docs/s: RayExecutor / LocalExecutor(workers={cores}), Ray start-up excluded "
            f"({corpus.size})", Measure("ray", "docs/s", ray_dps["ray"]),
            Measure(f"workers={cores}", "docs/s", local_dps), ">=", 0.7,
            note="Ray's raylet and GCS run outside this process tree: the 'other processes' figure includes them"),
        Row("9b", "Ray start-up: curate.py --executor ray minus --executor local on one file, wall s",
            Measure("ray extra", "s", startup), Measure("local run", "s", local_walls), "report", 0.0,
            value=statistics.median(startup),
            note="value is seconds: starting a local Ray, its actors, and shutting it down"),
        Row("9c", "the same with a pool per stage: RayExecutor(fuse=False) / LocalExecutor, start-up excluded",
            Measure("ray per stage", "docs/s", ray_dps["ray-per-stage"]),
            Measure(f"workers={cores}", "docs/s", local_dps), "report", 0.0,
            note="what fusing the CPU stages into one pool saves: per-stage pools hand every table through "
            "Ray's object store"),
    ]  # fmt: skip

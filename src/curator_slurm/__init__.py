"""curator-slurm: data-curation pipelines that shard themselves across Slurm job arrays.

``import curator_slurm`` stays light: Ray is imported only when a RayExecutor is used.
"""

import gc
import os

# numpy is a dependency (deduplication), and pyarrow imports it whenever it is installed. Its OpenBLAS
# starts a pool of threads as it loads, sized for the whole machine, in the driver and in every worker.
# This package runs one worker per CPU and uses no BLAS, so it asks for one BLAS thread unless the
# environment already says otherwise (as Ray does for its workers). It takes effect only when numpy was
# not imported before this package; either way LocalExecutor stops an idle OpenBLAS pool before it forks
# its workers (backends/local.py, stop_openblas_threads), so the import order never makes them spawn.
for _name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # not OMP_NUM_THREADS: Arrow sizes its pool by it
    os.environ.setdefault(_name, "1")

# Importing pyarrow and this package leaves some 14,000 objects that live as long as the process and
# makes no garbage cycles, so the cyclic collector's 40-odd passes during the import find nothing. They
# cost about 4 ms of CPU in every process (every array task, every spawned worker), so the collector is
# paused for the import and then restored.
_collecting = gc.isenabled()
gc.disable()
try:
    from curator_slurm.backends.local import LocalExecutor
    from curator_slurm.errors import (
        CuratorError,
        FilterError,
        FingerprintError,
        InputError,
        PipelineBuildError,
        PipelineFailedError,
        SettingError,
        ShardConfigError,
    )
    from curator_slurm.logs import configure_logging
    from curator_slurm.pipeline import Pipeline
    from curator_slurm.runs.results import PipelineResult
    from curator_slurm.runs.steps import is_driver
    from curator_slurm.shard import ShardSpec
    from curator_slurm.tasks import DocumentBatch, EmptyTask, FailedTask, FileGroupTask, NoneTask, Task
finally:
    if _collecting:
        gc.enable()

from curator_slurm._version import __version__  # noqa: E402 - the one place it is written

__all__ = [
    "CuratorError",
    "DocumentBatch",
    "EmptyTask",
    "FailedTask",
    "FileGroupTask",
    "FilterError",
    "FingerprintError",
    "InputError",
    "LocalExecutor",
    "NoneTask",
    "Pipeline",
    "PipelineBuildError",
    "PipelineFailedError",
    "PipelineResult",
    "SettingError",
    "ShardConfigError",
    "ShardSpec",
    "Task",
    "__version__",
    "configure_logging",
    "is_driver",
]

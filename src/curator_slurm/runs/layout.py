"""Every name in a run directory and next to an output: the one place that spells the layout."""

from __future__ import annotations

import os

#: Where a run directory goes when none is given and the sink writes files: inside its output directory.
DEFAULT_RUN_DIR_NAME = ".curator-run"
#: Where a workflow keeps its intermediate files (shuffles, lists) by default: inside its output directory.
DEFAULT_WORK_DIR_NAME = ".curator-work"

# --- a run directory ------------------------------------------------------------------------------------
#: The pipeline's fingerprint (stage names and parameters), written once, atomically.
RUN_FILE = "run.json"
#: Count and digest of the source task ids the first process saw (and the balanced strategy's weights).
SOURCES_FILE = "sources.json"
#: ``sources/<digest>.ids``: the source task ids of the listing ``sources.json`` names, as sorted 64-bit hashes.
SOURCE_IDS_DIR = "sources"
#: The earlier phases this run reads (name, run directory, per task), for `status --verify` and `retry`.
UPSTREAMS_FILE = "upstreams.json"
#: The ledger: one JSON-lines file per process (:mod:`curator_slurm.runs.ledger`).
LEDGER_DIR = "ledger"
#: ``claims/<job id>/step<step>-r<restart>-shard<i>of<n>``: one per shard done in a Slurm job step.
CLAIMS_DIR = "claims"
#: Takeover claims: ``takeover/<namespace>/<shard>/<group>-<generation>``, one per group of a shard's source tasks
#: that a process started (its owner, or a taker once the owner's process is gone or busy), and
#: ``takeover/<namespace>/<shard>.end`` once the owner finished its own; both removed when the owner ends with every
#: task of its shard done (:mod:`curator_slurm.runs.claims`).
TAKEOVER_DIR = "takeover"
#: ``refusals/<array job id>_<task id>.json``: why the run directory refused a Slurm task before any work.
REFUSALS_DIR = "refusals"
#: ``live/<host>-<pid>``: a marker per process working in the run directory right now.
LIVE_DIR = "live"
#: ``progress/<host>-<pid>.json``: what each process of the run is doing now (:mod:`curator_slurm.runs.progress`).
PROGRESS_DIR = "progress"
#: ``ledger-summaries/<ledger file>.json`` and ``.ids``: the sums and done keys each ledger file's writer keeps.
SUMMARIES_DIR = "ledger-summaries"
#: What `curator-slurm submit` planned: every source task with its weight.
PLAN_FILE = "plan.json"
#: One line per `submit` and `retry`: options, arrays and their job ids.
SUBMISSIONS_FILE = "submissions.jsonl"
#: The source tasks of a planned array, by shard (:mod:`curator_slurm.runs.manifest`).
MANIFEST_DIR = "manifest"
#: The lists of source tasks a `retry` submitted (``CURATOR_SOURCE_LIST``).
RETRIES_DIR = "retries"
#: The driver jobs of a script of several steps.
DRIVER_FILE = "driver-jobs.txt"

# --- a workflow's run directory (its phases' run directories are inside) --------------------------------
#: Names the phases in order: marks a directory as a workflow's.
WORKFLOW_FILE = "workflow.json"


def phase_run_dir(run_root: str, phase: str) -> str:
    """The run directory of phase ``phase`` of the workflow whose run directory is ``run_root``."""
    return os.path.join(run_root, phase)


def is_workflow_root(path: str) -> bool:
    """Whether ``path`` is a workflow's run directory."""
    return os.path.exists(os.path.join(path, WORKFLOW_FILE))


__all__ = [
    "CLAIMS_DIR",
    "DEFAULT_RUN_DIR_NAME",
    "DEFAULT_WORK_DIR_NAME",
    "DRIVER_FILE",
    "LEDGER_DIR",
    "LIVE_DIR",
    "MANIFEST_DIR",
    "PLAN_FILE",
    "PROGRESS_DIR",
    "REFUSALS_DIR",
    "RETRIES_DIR",
    "RUN_FILE",
    "SOURCES_FILE",
    "SOURCE_IDS_DIR",
    "SUBMISSIONS_FILE",
    "SUMMARIES_DIR",
    "TAKEOVER_DIR",
    "UPSTREAMS_FILE",
    "WORKFLOW_FILE",
    "is_workflow_root",
    "phase_run_dir",
]

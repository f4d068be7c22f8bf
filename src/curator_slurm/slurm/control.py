"""Talking to Slurm's controller from inside a job."""

from __future__ import annotations

import logging

from curator_slurm.slurm.env import JobInfo

logger = logging.getLogger(__name__)


def requeue(job: JobInfo) -> bool:
    """Ask Slurm to requeue this job (it must have been submitted with ``--requeue``); True on success.

    After the requeue the job starts again with ``SLURM_RESTART_COUNT`` one higher and resumes from
    the ledger.
    """
    import shutil  # here, not at the top: every array task imports this module, few ever requeue
    import subprocess

    if not job.job_id:
        logger.warning("requeue requested, but this process is not part of a Slurm job; not requeued")
        return False
    if shutil.which("scontrol") is None:
        logger.warning("requeue requested, but scontrol is not on PATH; not requeued")
        return False
    proc = subprocess.run(["scontrol", "requeue", job.job_id], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        logger.warning(f"scontrol requeue {job.job_id} failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return False
    logger.info(f"requeued job {job.job_id}; it will resume from the ledger")
    return True

"""Console logging with the shard and job bound into every line."""

from __future__ import annotations

import sys

from loguru import logger

FORMAT = (
    "<green>{time:YYYY-MM-DD HH:mm:ss}</green> | <level>{level: <7}</level> | "
    "<cyan>{extra[shard]}</cyan> <dim>{extra[job]}</dim> | {message}"
)


def configure_logging(level: str = "INFO") -> None:
    """Replace loguru's default handler with one that shows ``shard i/N`` and the Slurm job id.

    Lines logged without a bound shard show ``-``. Call it once at the top of a pipeline script.
    """
    logger.remove()
    logger.configure(extra={"shard": "-", "job": "-"})
    logger.add(sys.stderr, level=level, format=FORMAT, colorize=None)

"""Console logging with the shard and job in every line.

The package logs through the standard library's ``logging``, under the ``curator_slurm`` logger.
Importing it costs a few milliseconds, which every array task pays once (see docs/performance.md).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

#: Every logger of the package sits under this one.
ROOT = "curator_slurm"

FORMAT = "%(asctime)s | %(levelname)-7s | %(shard)s %(job)s | %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The console handler this module installs; found again by its type so that it is never added twice."""


def _formatter(fmt: str = FORMAT) -> logging.Formatter:
    # Lines logged outside a shard (module loggers, workers) show ``-`` where the shard and job go.
    return logging.Formatter(fmt, DATE_FORMAT, defaults={"shard": "-", "job": "-"})


class _DefaultHandler(_Handler):
    """The handler :func:`ensure_logging` installs: it steps aside once the script gives the root logger
    a handler of its own (``logging.basicConfig`` after a first run), so no line is printed twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not logging.getLogger().handlers and bool(super().filter(record))


def _console(level: int | str, kind: type[_Handler] = _Handler) -> _Handler:
    handler = kind(sys.stderr)
    handler.setFormatter(_formatter())
    handler.setLevel(level)
    return handler


def configure_logging(level: str = "INFO") -> None:
    """Send the package's log lines to stderr, each with ``shard i/N`` and the Slurm job id.

    Lines logged outside a shard show ``-`` there. Call it once at the top of a pipeline script;
    calling it again changes the level. The package's lines then go only to this handler, not also
    to handlers the script put on the root logger.
    """
    package = logging.getLogger(ROOT)
    for handler in [h for h in package.handlers if isinstance(h, _Handler)]:
        package.removeHandler(handler)
    package.addHandler(_console(level))
    package.setLevel(level)
    package.propagate = False


def ensure_logging(level: int | str = logging.INFO) -> None:
    """Make progress visible by default: install the console handler at ``level`` when nothing was configured.

    Nothing is changed when the package's logger or the root logger already has a handler (the script,
    or a test runner, decided where lines go) or when logging was disabled for the package. The handler
    steps aside once the root logger gets one later.
    """
    package = logging.getLogger(ROOT)
    if package.handlers or logging.getLogger().handlers or package.disabled:
        return
    package.addHandler(_console(level, _DefaultHandler))
    if package.level == logging.NOTSET:
        package.setLevel(level)


def effective_level() -> int:
    """The level of the package's logger, to hand to worker processes that start without it."""
    return logging.getLogger(ROOT).getEffectiveLevel()


def bound(shard: str, job: str) -> logging.LoggerAdapter:  # type: ignore[type-arg]
    """A logger whose lines carry this shard's label and Slurm job."""
    return logging.LoggerAdapter(logging.getLogger(ROOT), {"shard": shard, "job": job})


class CollectWarnings(logging.Handler):
    """Hands the message of every warning or error to ``sink`` (Ray workers send them to the driver).

    Ray's own loggers are left out: their lines stay in Ray's log files."""

    def __init__(self, sink: Callable[[str], object]) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink
        self.setFormatter(logging.Formatter("%(message)s"))
        self.addFilter(lambda record: record.name != "ray" and not record.name.startswith("ray."))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink(self.format(record))
        except Exception:  # a bad format in a log call is logging's error to report, not the stage's
            self.handleError(record)

"""Console logging with the shard and job in every line: the package logs through stdlib ``logging`` under
``curator_slurm``, and a run hands those records (and stray stdlib ones) to loguru, imported only then.
Design: docs/design.md, "Logging"."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import FrameType

    from loguru import Message, Record

#: Every logger of the package sits under this one.
ROOT = "curator_slurm"

#: The line format (a loguru format string); ``shard`` and ``job`` are ``-`` where unknown.
FORMAT = "{time:YYYY-MM-DD HH:mm:ss} | {level: <7} | {extra[shard]} {extra[job]} | {message}"

#: The stdlib handler that stdlib calls when no handler takes a record; replaced only while it is this one.
_STDLIB_LAST_RESORT = logging.lastResort


class _Binding:
    """The shard and job of this process: one process works for one shard (a driver, its workers)."""

    shard = "-"
    job = "-"
    #: The id of the console sink this module added to loguru, to replace it rather than add a second.
    sink: int | None = None
    #: Whether loguru's patcher fills in the shard and job (once per process; a forked worker inherits it).
    patched = False
    #: The patcher the script had set before, run first.
    before: Callable[[Any], None] | None = None


class _Reentry(threading.local):
    busy = False


_reentry = _Reentry()


def _defaults(record: Record) -> None:
    # Lines that carry no shard of their own (a stage's loguru call, a module logger) get this process's.
    record["extra"].setdefault("shard", _Binding.shard)
    record["extra"].setdefault("job", _Binding.job)


def _format(record: Record) -> str:
    _defaults(record)  # in case the script replaced the patcher (logger.configure(patcher=...)) since
    return FORMAT + "\n{exception}"


def _patch_every_record() -> None:
    """Make every loguru record carry ``shard`` and ``job`` (for every sink, a script's ``{extra[shard]}`` too),
    through loguru's one global patcher; a patcher the script set before is kept and runs first."""
    from loguru import logger

    if _Binding.patched:
        return
    _Binding.before = getattr(getattr(logger, "_core", None), "patcher", None)  # loguru has no public getter
    logger.configure(patcher=_patcher)
    _Binding.patched = True


def _patcher(record: Record) -> None:
    # A module-level function: a pickled logger (Ray sends a stage's globals by value) refers to it by name.
    if _Binding.before is not None:
        _Binding.before(record)
    _defaults(record)


def _to_stderr(message: Message) -> None:
    # sys.stderr looked up per line: a test runner (or the script) may replace it after the sink is added.
    sys.stderr.write(message)
    sys.stderr.flush()


class _ToLoguru(logging.Handler):
    """Hands stdlib records to loguru, with the record's shard and job (from :func:`bound`) or the process's.

    It sits on the package's logger and, as ``logging.lastResort``, takes the records no handler took."""

    def emit(self, record: logging.LogRecord) -> None:
        if _reentry.busy:  # a loguru sink that feeds stdlib back (loguru's PropagateHandler) must not loop
            return
        from loguru import logger

        try:
            message = record.getMessage()
        except Exception:  # a bad format in a log call is logging's error to report, not the stage's
            self.handleError(record)
            return
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:  # a custom stdlib level loguru does not know
            level = record.levelno
        # loguru takes the function and line from the frame that made the log call (the first one outside
        # the logging package), not this handler's, and decides by that frame's module whether the line is
        # enabled: ``logger.disable("curator_slurm")`` silences the package's lines and nothing else. The
        # record's name stays the stdlib logger's, which sinks may filter on.
        frame: FrameType | None = logging.currentframe()
        depth = 0
        while frame is not None and (depth == 0 or frame.f_code.co_filename == logging.__file__):
            frame, depth = frame.f_back, depth + 1
        extra = {
            "shard": getattr(record, "shard", _Binding.shard),
            "job": getattr(record, "job", _Binding.job),
            "stdlib": True,
        }
        _reentry.busy = True
        try:
            named = logger.patch(lambda r: r.update(name=record.name))  # type: ignore[call-arg]
            named.bind(**extra).opt(depth=depth, exception=record.exc_info).log(level, message)
        finally:
            _reentry.busy = False


def _bridge() -> logging.Logger:
    """Route the package's stdlib records (and those no handler takes) into loguru, once per process."""
    package = logging.getLogger(ROOT)
    if not any(isinstance(h, _ToLoguru) for h in package.handlers):
        package.addHandler(_ToLoguru())
    # Only through loguru: a root handler the script adds must not print each line a second time.
    package.propagate = False
    if logging.lastResort is _STDLIB_LAST_RESORT:
        logging.lastResort = _ToLoguru(logging.WARNING)  # stdlib's level for it: no library INFO noise
    _patch_every_record()
    return package


def _add_console(level: int) -> None:
    from loguru import logger

    if _Binding.sink is not None:
        with contextlib.suppress(ValueError):  # the script removed every sink (logger.remove()) since
            logger.remove(_Binding.sink)
    _Binding.sink = logger.add(_to_stderr, level=level, format=_format, backtrace=False, diagnose=False)


def _remove_loguru_default() -> bool:
    """Remove loguru's own stderr sink (id 0), which would print every line again in its format;
    False when it was gone already, i.e. the script (or this module) configured loguru."""
    from loguru import logger

    try:
        logger.remove(0)
    except ValueError:
        return False
    return True


def _level(level: int | str) -> int:
    """A level name (any case) or number as stdlib's number, which both stdlib and loguru take."""
    if isinstance(level, int):
        return level
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(
            f"unknown log level {level!r} for configure_logging(level=...); use DEBUG, INFO, WARNING, ERROR or CRITICAL"
        )
    return number


def configure_logging(level: str = "INFO") -> None:
    """Send the package's log lines to stderr, each with ``shard i/N`` and the Slurm job id.

    Lines logged outside a shard show ``-`` there. Call it once at the top of a pipeline script;
    calling it again changes the level (one sink, never two). The lines go through loguru: sinks the
    script adds with ``logger.add`` receive them too, and loguru's own default stderr sink is removed
    so that no line is printed twice. They do not also go to handlers on the stdlib root logger.
    """
    number = _level(level)
    package = _bridge()
    package.setLevel(number)
    _remove_loguru_default()
    _add_console(number)


def ensure_logging(level: int | str = logging.INFO, shard: str | None = None, job: str | None = None) -> None:
    """Make progress visible by default; every run (and every spawned worker) calls it.

    The package's records go to loguru from now on. The console sink is added at ``level`` only if loguru
    still has its default sink, i.e. neither the script nor :func:`configure_logging` chose the sinks.
    Nothing changes when logging was disabled for the package. ``shard`` and ``job`` make this process's
    lines carry them (a worker process of a shard).
    """
    number = _level(level)
    if shard is not None or job is not None:
        _Binding.shard, _Binding.job = shard or "-", job or "-"
    package = logging.getLogger(ROOT)
    if package.disabled:
        return
    _bridge()
    if package.level == logging.NOTSET:
        package.setLevel(number)
    if _remove_loguru_default():
        _add_console(number)


def effective_level() -> int:
    """The level of the package's logger, to hand to worker processes that start without it."""
    return logging.getLogger(ROOT).getEffectiveLevel()


def bound(shard: str, job: str) -> logging.LoggerAdapter[logging.Logger]:
    """A logger whose lines carry this shard's label and Slurm job.

    The shard becomes this process's too: lines without one of their own (a stage's loguru or stdlib
    logger, a module's logger) carry it from now on."""
    _Binding.shard, _Binding.job = shard, job
    return logging.LoggerAdapter(logging.getLogger(ROOT), {"shard": shard, "job": job})


class CollectWarnings(logging.Handler):
    """Hands the message of every warning or error to ``sink`` (Ray workers send them to the driver).

    Attach it to the stdlib loggers to watch; it also receives the warnings that code logs with loguru's
    ``logger`` directly (a stage's own). Ray's own loggers are left out: their lines stay in Ray's log files.

    Args:
        sink: called with the message of each warning or error.
    """

    def __init__(self, sink: Callable[[str], object]) -> None:
        from loguru import logger

        super().__init__(logging.WARNING)
        self.sink = sink
        self.setFormatter(logging.Formatter("%(message)s"))
        self.addFilter(lambda record: record.name != "ray" and not record.name.startswith("ray."))
        # Records that came from stdlib reach this handler there; loguru's own reach it through this sink.
        self._loguru_sink: int | None = logger.add(
            self._from_loguru, level="WARNING", format="{message}", filter=_not_from_stdlib, catch=True
        )

    def _from_loguru(self, message: Message) -> None:
        self.sink(message.record["message"])

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink(self.format(record))
        except Exception:  # a bad format in a log call is logging's error to report, not the stage's
            self.handleError(record)

    def close(self) -> None:
        from loguru import logger

        if self._loguru_sink is not None:
            with contextlib.suppress(ValueError):
                logger.remove(self._loguru_sink)
            self._loguru_sink = None
        super().close()


def _not_from_stdlib(record: Any) -> bool:
    return "stdlib" not in record["extra"] and not (record["name"] or "").startswith("ray")

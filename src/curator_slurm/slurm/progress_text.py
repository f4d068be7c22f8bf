"""The lines of `curator-slurm status` about the processes running source tasks now, and those that died."""

from __future__ import annotations

from typing import Any

#: Running processes listed without ``--all`` (the longest-running first, every straggler besides).
SHOWN = 10


def _size(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return "-"


def format_running(status: dict[str, Any], show_all: bool) -> list[str]:
    """A table of the processes running a source task (shard, host:pid, source task, documents in and out so
    far, seconds, documents per second, its input's size, ``STRAGGLER`` where the rule says so), then one line
    per process that died while running one."""
    running, dead = status.get("running") or [], status.get("dead") or []
    lines = []
    if running:
        shown = (
            running
            if show_all
            else running[:SHOWN] + [e for e in running[SHOWN:] if e["straggler"] or not e.get("progressing", True)]
        )
        stragglers = sum(e["straggler"] for e in running)
        frozen = sum(not e.get("progressing", True) for e in running)
        lines.append(
            f"running: {len(running)} process(es) on a source task now"
            + (f", {stragglers} straggling" if stragglers else "")
            + (f", {frozen} not progressing" if frozen else "")
            + (f" (the {len(shown)} longest running shown; --all for every one)" if len(shown) < len(running) else "")
        )
        lines.append(
            f"{'shard':>10} {'process':<24} {'source task':<18} {'docs in':>9} {'docs out':>9} {'seconds':>8} "
            f"{'docs/s':>8} {'input':>9}"
        )
        for e in shown:
            rate = "-" if e["docs_per_second"] is None else f"{e['docs_per_second']:.0f}"
            flags = " STRAGGLER" if e["straggler"] else ""
            if not e.get("progressing", True):
                flags += f" NOT PROGRESSING (no news for {e['updated_seconds_ago']:.0f} s: frozen or stopped?)"
            process = f"{e['host']}:{e['pid']}"
            task = str(e["source_task"])[:18]
            lines.append(
                f"{e['shard'] or '-':>10} {process:<24} {task:<18} {e['docs_in']:>9} {e['docs_out']:>9} "
                f"{e['seconds']:>8.0f} {rate:>8} {_size(e['bytes']):>9}{flags}"
            )
    for e in dead:
        lines.append(
            f"dead: {e['host']}:{e['pid']} (shard {e['shard']}) ended without finishing source task "
            f"{e['source_task']} after {e['seconds']:.0f} s ({e['docs_in']} docs in, {e['docs_out']} out when last "
            f"seen, {e['updated_seconds_ago']:.0f} s ago): killed"
        )
    return lines

"""The text `curator-slurm status` and `failures` print, from the data of :mod:`curator_slurm.slurm.status`."""

from __future__ import annotations

import os
import re
from typing import Any

from curator_slurm.runs.summary import describe_s3, describe_takeover
from curator_slurm.slurm.progress_text import format_running


def shard_order(row: dict[str, Any]) -> tuple[int, int, str]:
    """By shard count, then index: ``2/16`` before ``10/16``, and the shards of one count together."""
    index, _, count = str(row["shard"]).partition("/")
    if index.isdigit() and count.isdigit():
        return int(count), int(index), ""
    return -1, -1, str(row["shard"])


def format_workflow_status(
    statuses: dict[str, dict[str, Any] | None],
    show_all: bool,
    stopped_root: str | None = None,
    starting: list[str] | None = None,
) -> str:
    """The text of `curator-slurm status` for a workflow: each phase's, under its name (``starting``: those
    being set up), and a last line when it is stopped (``stopped_root``, its run directory)."""
    lines = [
        f"== phase {name}: {'starting' if name in (starting or []) else 'not started'}"
        if s is None
        else f"== phase {name}\n{format_status(s, show_all)}"
        for name, s in statuses.items()
    ]
    if stopped_root is not None:
        waiting = next((name for name, s in statuses.items() if s is None or s["pending"] or s["failed"]), None)
        lines.append(
            f"stopped: phase {waiting} is not complete and nothing of this workflow is queued or running; resume "
            f"with `curator-slurm retry {stopped_root}` (submitted runs) or by running the script again (done "
            "work is skipped)"
        )
    return "\n".join(lines)


def _attention_lines(status: dict[str, Any]) -> list[str]:
    """What `status` says right after its counts when the counts alone would mislead: damaged inputs that lost
    records, and done tasks of inputs the current listing no longer has."""
    lines = []
    if status.get("damaged"):
        first = (status.get("notes", {}).get("damaged") or [{}])[0]
        lines.append(
            f"DAMAGED INPUT: {status['damaged']} input(s) lost records to damage (first: {first.get('file')} at byte "
            f"{first.get('offset')}: {first.get('error')}); their source tasks are done (no retry can fix a damaged "
            "file) and the output lacks what the damage took: see the list below (exit code 3)"
        )
    if status.get("done_not_listed"):
        lines.append(
            f"  (and {status['done_not_listed']} done source task(s) of inputs the current listing no longer has: "
            "not counted)"
        )
    if frozen := status.get("processes", {}).get("frozen"):
        lines.append(
            f"warning: every process of this run is stopped ({', '.join(frozen[:3])}): nothing advances, no ETA; "
            "continue them (kill -CONT <pid>) or end them"
        )
    return lines


def format_status(status: dict[str, Any], show_all: bool) -> str:
    """The text of `curator-slurm status` for ``status`` (from :func:`collect_status`); without
    ``show_all`` a large run shows only the shards with failures and the slowest ones."""

    def num(value: float | None, fmt: str = "{:.1f}") -> str:
        return "-" if value is None else fmt.format(value)

    lines = [
        f"run directory {status['run_dir']}",
        f"source tasks: {status['total']} total, {status['done']} done, {status['failed']} failed, "
        f"{status['pending']} pending ({status['percent']:.1f}% done)",
    ]
    lines.extend(_attention_lines(status))
    eta = "stopped" if status["stalled"] else f"ETA {num(status['eta_seconds'], '{:.0f}')} s"
    lines.append(
        f"documents: {status['rows_in']} in, {status['rows_out']} out; throughput "
        f"{num(status['docs_per_second'], '{:.0f}')} docs/s, {num(status['tasks_per_second'], '{:.2f}')} tasks/s; {eta}"
    )
    if status.get("tokens") is not None:
        lines.append(f"tokens: {status['tokens']} in the outputs of the done source tasks")
    if status.get("s3"):  # object-store requests of every recorded attempt; retries distinct from task retries
        lines.append(describe_s3(status["s3"]) + " by the recorded source tasks (request retries, not task retries)")
    lines.extend(format_running(status, show_all))
    if taken := describe_takeover(status.get("takeover"), status["done"]):
        lines.append(taken)
    lines.extend(format_funnel(status["funnel"]))
    lines.extend(format_stage_seconds(status["funnel"]))
    lines.extend(format_notes(status.get("notes") or {}))
    if status["job_states"] is not None:
        states = ", ".join(f"{n} {s}" for s, n in sorted(status["job_states"].items())) or "none known to Slurm"
        lines.append(f"array tasks of jobs {', '.join(status['jobs']) or '-'}: {states}")
    ended = status["ended_tasks"]
    for t in ended if show_all else ended[:10]:
        if not t["started"]:
            gone = "; Slurm lists it no more" if t.get("unlisted") else ""
            lines.append(
                f"array task {t['job']} (shard {t['shard']}) ended {t['state']} before it started (no log{gone})"
            )
            continue
        what = "after recording some work" if t["recorded"] else "without recording any work"
        lines.append(f"array task {t['job']} (shard {t['shard']}) ended {t['state']} {what}; log: {t['log']}")
    if len(ended) > 10 and not show_all:
        lines.append(f"... and {len(ended) - 10} more array tasks that ended badly (--all lists them)")
    if status["last_submission_failed"] and not status["pending"] and not status["failed"]:
        lines.append(
            f"not complete: {status['last_submission_failed']} array task(s) of the last submission ended badly "
            "(see their logs above), although every source task is recorded done"
        )
    if status["stalled"] and status["jobs"]:
        lines.append(
            f"stopped: {status['pending']} source tasks pending and no job of this run is queued or running "
            f"(nor any process of it); see the logs above and `curator-slurm failures {status['run_dir']}`, then "
            f"`curator-slurm retry {_retry_target(status['run_dir'])}`"
        )
    elif status["stalled"]:
        gone = status["processes"]["gone"]
        killed = f" ({len(gone)} ended without finishing: {', '.join(gone[:3])})" if gone else ""
        lines.append(
            f"stopped: {status['pending']} source tasks pending and no process of this run is running{killed}; "
            "run the same command again to resume (done work is skipped)"
        )
    lines.extend(_verify_lines(status.get("verified")))
    shards = status["shards"]
    if shards:
        shown = shards
        if not show_all and len(shards) > 20:
            incomplete = [s for s in shards if s["failed"]]
            slowest = sorted(shards, key=lambda s: -s["seconds"])[:5]
            shown = sorted({s["shard"]: s for s in incomplete + slowest}.values(), key=shard_order)
            lines.append(f"shards with failures and the 5 slowest of {len(shards)} (--all for every shard):")
        lines.append(f"{'shard':>10} {'done':>6} {'failed':>6} {'seconds':>9} {'docs in':>10}  job")
        for s in shown:
            state = f" {s['state']}" if s.get("state") else ""
            lines.append(
                f"{s['shard']:>10} {s['done']:>6} {s['failed']:>6} {s['seconds']:>9.1f} {s['rows_in']:>10}  "
                f"{s['job'] or '-'}{state}"
            )
    return "\n".join(lines)


def format_funnel(funnel: list[dict[str, Any]]) -> list[str]:
    """The funnel's lines: per stage, documents in, out and dropped, and the characters it removed (``-``
    when unknown or nothing came in), with those its rewriting removed said after them."""
    if not funnel:
        return []
    lines = [
        f"funnel of the done source tasks, all shards: {'docs in':>10} {'docs out':>10} {'dropped':>10} "
        f"{'chars removed':>14}"
    ]
    for row in funnel:
        known = row["rows_in"] and row.get("chars_removed") is not None
        dropped = row["dropped"] if row["rows_in"] else "-"
        chars = row["chars_removed"] if known else "-"
        line = f"  {row['stage']:<45} {row['rows_in']:>10} {row['rows_out']:>10} {dropped:>10} {chars:>14}"
        if known and row.get("chars_rewritten"):
            line += f" ({row['chars_rewritten']} by rewriting)"
        lines.append(line)
    return lines


def format_stage_seconds(funnel: list[dict[str, Any]]) -> list[str]:
    """The seconds each stage spent on the done source tasks (all shards) and its share of them, under the
    funnel; nothing when no done record carried them."""
    timed = [row for row in funnel if row.get("seconds") is not None]
    if not timed:
        return []
    total = sum(row["seconds"] for row in timed)
    lines = [f"time per stage, done source tasks, all shards: {'seconds':>10} {'share':>7}"]
    for row in timed:
        share = f"{100 * row['seconds'] / total:.1f}%" if total > 0 else "-"
        lines.append(f"    {row['stage']:<43} {row['seconds']:>10.1f} {share:>7}")
    return lines


def _retry_target(run_dir: str) -> str:
    """What to give `retry` for ``run_dir``: a workflow phase is retried through its workflow."""
    from curator_slurm.workflows.workflow import workflow_phases

    root = os.path.dirname(os.path.abspath(run_dir))
    phases = workflow_phases(root) or []
    return root if os.path.basename(os.path.abspath(run_dir)) in phases else run_dir


def _verify_lines(verified: dict[str, Any] | None) -> list[str]:
    """What `status --verify` found, as lines (none without --verify)."""
    if verified is None:
        return []
    lost, changed = verified["lost_outputs"], verified["changed_inputs"]
    gone, stale = verified.get("upstream_problems") or [], verified.get("stale") or []
    damaged, unlisted = verified.get("damaged_records") or [], verified.get("unlisted_outputs") or []
    lines = [f"{len(damaged)} damaged ledger record(s) skipped ({'; '.join(damaged[:3])}): a source task whose "
             "only done record it was counts as not done, and is done again"] if damaged else []  # fmt: skip
    if unlisted:
        lines.append(
            f"not complete: {len(unlisted)} output(s) of done source tasks that the current listing no longer holds "
            f"(inputs removed since, or records of another run) are still there, accounted for by nothing "
            f"({'; '.join(unlisted[:3])}); delete them if they should not be part of the output"
        )
    if not lost and not changed and not gone and not stale and not unlisted:
        return [*lines, "verified: every done source task's outputs exist with their recorded sizes, and its "
                "inputs are unchanged"]  # fmt: skip
    if gone:
        lines.append(
            f"not complete: {len(gone)} output(s) of the phase before that this phase read are gone or changed "
            f"({'; '.join(gone[:3])}); `curator-slurm retry` (or the script again) does that phase's tasks again, "
            "then this phase's"
        )
    if stale:
        lines.append(
            f"not complete: {len(stale)} done source task(s) read outputs of the phase before that were recorded "
            f"again since ({', '.join(stale[:3])}); they are done again by the next run of this phase"
        )
    if lost:
        first = "; ".join(p[0] for p in list(lost.values())[:3])
        lines.append(
            f"not complete: {len(lost)} done source task(s) lost outputs ({first}); running the same command "
            "again (or `curator-slurm retry`) does them again"
        )
    if changed:
        lines.append(
            f"not complete: {len(changed)} input file(s) changed since done work read them ({'; '.join(changed[:3])})"
            "; restore them, or start afresh in a new output directory"
        )
    return lines


def format_notes(notes: dict[str, Any]) -> list[str]:
    """The lines of `status` that say why stages dropped documents and which inputs were damaged."""
    lines = []
    if notes.get("counts"):
        lines.append("noted by stages (documents skipped or dropped, by cause):")
        lines.extend(f"  {cause:<60} {n:>10}" for cause, n in sorted(notes["counts"].items()))
    lines.extend(format_damaged(notes.get("damaged") or []))
    return lines


def format_damaged(damaged: list[dict[str, Any]]) -> list[str]:
    """One line per damaged input: the file, the byte offset of the damage and the error."""
    if not damaged:
        return []
    lines = [f"{len(damaged)} damaged input(s); the records in the damaged bytes were lost, the rest was read:"]
    lines.extend(f"- {d.get('file')} at byte {d.get('offset')}: {d.get('error')}" for d in damaged)
    return lines


def format_failures(
    rows: list[dict[str, Any]],
    tasks: list[dict[str, Any]],
    traceback: bool,
    damaged: list[dict[str, Any]] | None = None,
) -> str:
    """The text of `curator-slurm failures` for :func:`failure_rows`' ``rows`` and ended array ``tasks``, and the
    ``damaged`` inputs of done tasks (``status.damaged_inputs``) after them. Terminal control characters (in a
    file name, an error message) are shown escaped, never sent to the terminal."""
    return terminal_safe("\n".join([_format_failures(rows, tasks, traceback), *format_damaged(damaged or [])]))


#: Control characters (C0 but tab and newline, DEL, C1) as a terminal would obey them.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with each terminal control character (an escape sequence's ESC, a carriage return, a bell)
    written as Python would show it (``\\x1b``), and a name's bytes that are not UTF-8 as ``\\udcNN``."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate (bytes not UTF-8)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _format_failures(rows: list[dict[str, Any]], tasks: list[dict[str, Any]], traceback: bool) -> str:
    if not rows and not tasks:
        return "no failed source tasks"
    lines = [f"- {r['error']} (shard {r['shard']})" + (f"; log: {r['log']}" if r["log"] else "") for r in tasks]
    if not rows:
        lines.append("no failed source tasks recorded; the array tasks above ended before recording theirs")
        return "\n".join(lines)
    lines.append(f"{len(rows)} failed source task(s):")
    for r in rows:
        lines.append(
            f"- {r['source']} [{r['stage']}] after {r['attempts']} attempt(s), shard {r['shard']} on {r['host']}"
        )
        lines.append(f"  error: {(r['error'] or '').splitlines()[0] if r['error'] else ''}")
        if r["files"]:
            lines.append(f"  files: {', '.join(map(str, r['files']))}")
        if r["log"]:
            lines.append(f"  log:   {r['log']}")
        if traceback and r["traceback"]:
            lines.append("  " + r["traceback"].rstrip().replace("\n", "\n  "))
    return "\n".join(lines)

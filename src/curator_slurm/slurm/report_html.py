"""The page of `curator-slurm report`: one self-contained HTML file (plotly.js inside it, nothing fetched when it
is opened), drawn from :func:`curator_slurm.slurm.report.report_data` with Plotly (the ``report`` extra)."""

from __future__ import annotations

import datetime
from typing import Any

from curator_slurm import extras
from curator_slurm.slurm.report_parts import (
    _chart,
    _e,
    _go,
    _num,
    _table,
    _when,
    accounting_part,
    date_axis,
    nodes_part,
    overview,
    timeline_part,
    whole_ticks,
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1150px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; } h3 { margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.facts { display: flex; flex-wrap: wrap; gap: 1em; } .fact { background: #f4f6f8; padding: 0.5em 1em; }
.fact b { display: block; font-size: 1.3em; } .bad { color: #b00020; }
code { font-size: 0.9em; }
"""


def render_report(data: dict[str, Any]) -> str:
    """The whole page for ``data``."""
    plotly = extras.load("plotly.offline", "curator-slurm report (its charts)", "report")
    when = datetime.datetime.fromtimestamp(data["generated"]).strftime("%Y-%m-%d %H:%M:%S")
    body = [f"<h1>curator-slurm report</h1><p><code>{_e(data['run_dir'])}</code>, made {when}</p>"]
    body += [f"<p class=bad>warning: {_e(w)}</p>" for w in data.get("warnings") or []]
    body += overview(data) + timeline_part(data["timeline"]) + nodes_part(data["nodes"])
    body += accounting_part(data["accounting"])
    for section in data["sections"]:
        body.append(_section(section, data["workflow"]))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>curator-slurm report</title>"
        f"<style>{STYLE}</style><script>{plotly.get_plotlyjs()}</script></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def _section(section: dict[str, Any], workflow: bool) -> str:
    title = f"<h2>phase {_e(section['phase'])}</h2>" if workflow else ""
    status = section.get("status")
    if status is None:
        return title + "<p>not started</p>"
    parts = [title, _facts(status), _chart(_progress(status), "progress")]
    parts += _running(status)
    if status["funnel"]:
        parts += ["<h3>funnel per stage</h3>", _chart(_funnel(status["funnel"]), "funnel")]
        if any(r.get("chars_removed") for r in status["funnel"]):
            parts.append(_chart(_chars(status["funnel"]), "characters"))
        parts.append(_funnel_table(status["funnel"]))
        if any(r.get("seconds") is not None for r in status["funnel"]):
            parts += ["<h3>time per stage</h3>", _chart(_stage_seconds(status["funnel"]), "stage seconds")]
    if section["durations"]:
        parts += ["<h3>task durations</h3>", _chart(_durations(section), "durations"), _slowest(section)]
    if section["per_minute"]:
        parts += ["<h3>throughput over time</h3>", _chart(_throughput(section["per_minute"]), "throughput")]
    parts += _failures(section["failures"]) + _damaged(status) + _s3(status)
    return "\n".join(parts)


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return str(datetime.timedelta(seconds=round(seconds)))


def _facts(s: dict[str, Any]) -> str:
    eta = "stopped" if s["stalled"] else _fmt(s["eta_seconds"])
    rate = "-" if s["docs_per_second"] is None else f"{s['docs_per_second']:,.0f}"
    facts = [
        ("source tasks", f"{s['done']:,} / {s['total']:,} done ({s['percent']:.1f} %)"),
        ("failed", f"{s['failed']:,}"),
        ("pending", f"{s['pending']:,}"),
        ("ETA", eta),
        ("documents", f"{s['rows_in']:,} in, {s['rows_out']:,} out"),
        ("docs/s", rate),
        ("running now", f"{len(s.get('running') or [])}"),
    ]
    bad = {"failed"} if s["failed"] else set()
    if s["stalled"]:
        bad.add("ETA")
    cells = "".join(f"<div class='fact{' bad' if k in bad else ''}'>{_e(k)}<b>{_e(v)}</b></div>" for k, v in facts)
    return f"<div class='facts'>{cells}</div>"


def _progress(s: dict[str, Any]) -> Any:
    go = _go()
    figure = go.Figure()
    for name, value, color in (("done", s["done"], "#2e7d32"), ("failed", s["failed"], "#c62828"),
                               ("pending", s["pending"], "#9e9e9e")):  # fmt: skip
        figure.add_trace(go.Bar(x=[value], y=["source tasks"], name=name, orientation="h", marker_color=color))
    figure.update_layout(barmode="stack", height=200)
    whole_ticks(figure, "x", s["total"])
    return figure


def _funnel(funnel: list[dict[str, Any]]) -> Any:
    go = _go()
    stages = [r["stage"] for r in funnel]
    figure = go.Figure(
        [go.Bar(x=stages, y=[r["rows_in"] for r in funnel], name="documents in"),
         go.Bar(x=stages, y=[r["rows_out"] for r in funnel], name="documents out")]
    )  # fmt: skip
    figure.update_layout(barmode="group", yaxis_title="documents")
    return figure


def _chars(funnel: list[dict[str, Any]]) -> Any:
    go = _go()
    rows = [r for r in funnel if r.get("chars_removed") is not None]
    figure = go.Figure(
        [go.Bar(x=[r["stage"] for r in rows], y=[r["chars_dropped"] for r in rows], name="of dropped documents"),
         go.Bar(x=[r["stage"] for r in rows], y=[r["chars_rewritten"] for r in rows], name="by rewriting")]
    )  # fmt: skip
    figure.update_layout(barmode="stack", yaxis_title="characters removed")
    return figure


def _funnel_table(funnel: list[dict[str, Any]]) -> str:
    rows = [
        [_e(r["stage"]), _num(r["rows_in"]), _num(r["rows_out"]), _num(r["dropped"]), _num(r.get("chars_removed")),
         _num(r.get("seconds"), 1)]
        for r in funnel
    ]  # fmt: skip
    return _table(["stage", "docs in", "docs out", "dropped", "chars removed", "seconds"], rows, {1, 2, 3, 4, 5})


def _stage_seconds(funnel: list[dict[str, Any]]) -> Any:
    go = _go()
    rows = [r for r in funnel if r.get("seconds") is not None]
    total = sum(r["seconds"] for r in rows) or 1.0
    figure = go.Figure(
        go.Bar(
            x=[r["seconds"] for r in rows], y=[r["stage"] for r in rows], orientation="h",
            text=[f"{100 * r['seconds'] / total:.1f} %" for r in rows], textposition="auto",
        )
    )  # fmt: skip
    figure.update_layout(xaxis_title="seconds, all done source tasks", yaxis={"autorange": "reversed"})
    return figure


def _durations(section: dict[str, Any]) -> Any:
    go = _go()
    bins = section["durations"]
    centers = [(b["low"] * b["high"]) ** 0.5 if b["low"] > 0 else b["high"] / 2 for b in bins]
    figure = go.Figure(go.Bar(x=centers, y=[b["tasks"] for b in bins], width=[b["high"] - b["low"] for b in bins]))
    q = section["quantiles"]
    note = ", ".join(f"p{round(100 * float(k))}: {v:.3g} s" for k, v in q.items() if v is not None)
    figure.update_layout(xaxis={"type": "log", "title": f"seconds per source task ({note})"}, yaxis_title="tasks")
    whole_ticks(figure, "y", max((b["tasks"] for b in bins), default=0))
    return figure


def _slowest(section: dict[str, Any]) -> str:
    rows = [[_num(t["seconds"], 2), f"<code>{_e(t['source'])}</code>", _e(t["shard"])] for t in section["slowest"]]
    return "<p>the slowest source tasks</p>" + _table(["seconds", "source task", "shard"], rows, {0})


def _throughput(per_minute: list[tuple[int, int]]) -> Any:
    go = _go()
    times = [_when(60 * m) for m, _ in per_minute]
    figure = go.Figure(go.Bar(x=times, y=[n for _, n in per_minute]))
    figure.update_layout(yaxis_title="source tasks done per minute")
    date_axis(figure, 60 * per_minute[0][0], 60 * per_minute[-1][0] + 60)
    return figure


def _running(s: dict[str, Any]) -> list[str]:
    running, dead = s.get("running") or [], s.get("dead") or []
    if not running and not dead:
        return []
    rows = [
        [_e(e["shard"]), f"{_e(e['host'])}:{e['pid']}", f"<code>{_e(e['source_task'])}</code>", _num(e["docs_in"]),
         _num(e["docs_out"]), _num(e["seconds"]), "dead (killed)" if e in dead else "straggler" if e["straggler"]
         else "running"]
        for e in running + dead
    ]  # fmt: skip
    head = ["shard", "process", "source task", "docs in", "docs out", "seconds", ""]
    return ["<h3>processes now</h3>", _table(head, rows, {3, 4, 5})]


def _failures(groups: list[dict[str, Any]]) -> list[str]:
    if not groups:
        return []
    out = ["<h3>failures by exception</h3>"]
    for g in groups:
        logs = "".join(f"<li><code>{_e(log)}</code></li>" for log in g["logs"])
        sources = ", ".join(f"<code>{_e(s)}</code>" for s in g["sources"])
        more = " ..." if g["count"] > len(g["sources"]) else ""
        out.append(
            f"<p class='bad'><b>{_e(g['exception'])}</b> in stage {_e(g['stage'])}: {g['count']:,} source task(s)</p>"
            f"<p><code>{_e(g['message'])}</code></p><p>source tasks: {sources}{more}</p>"
            + (f"<p>logs:</p><ul>{logs}</ul>" if logs else "")
        )
    return out


def _damaged(s: dict[str, Any]) -> list[str]:
    damaged = (s.get("notes") or {}).get("damaged") or []
    if not damaged:
        return []
    code = "<code>{}</code>".format
    rows = [[code(_e(d.get("file"))), _e(d.get("offset")), _e(d.get("error")), code(_e(d.get("source")))]
            for d in damaged]  # fmt: skip
    return ["<h3>damaged inputs</h3>", _table(["file", "byte", "error", "source task"], rows, {1})]


def _s3(s: dict[str, Any]) -> list[str]:
    counts = s.get("s3")
    if not counts:
        return []
    go = _go()
    reasons = counts.get("reasons") or {}
    text = f"<p>{counts['requests']:,} requests, {counts['retries']:,} retried" + (
        f", {counts['gave_up']} gave up" if counts.get("gave_up") else "") + "</p>"  # fmt: skip
    figure = go.Figure(go.Bar(x=list(reasons), y=list(reasons.values())))
    figure.update_layout(yaxis_title="retries")
    chart = _chart(figure, "S3 retries by cause") if reasons else ""
    return ["<h3>S3 requests and retries</h3>", text, chart]


__all__ = ["render_report"]

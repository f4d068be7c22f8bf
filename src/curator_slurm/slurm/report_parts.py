"""The report page's building blocks (tables, charts, clock axes) and its parts that cover the whole run before its
phases: the overview (the workflow's numbers, funnel, drop reasons), the timeline, the nodes, Slurm accounting."""

from __future__ import annotations

import datetime
import html
from typing import Any

from curator_slurm import extras

#: Plotly's options for every chart: no logo, sized by the page.
CONFIG = {"displaylogo": False, "responsive": True}


def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(value: Any, digits: int = 0) -> str:
    """A number with thousands separators, ``-`` for None."""
    return "-" if value is None else f"{value:,.{digits}f}"


def _table(head: list[str], rows: list[list[str]], numeric: frozenset[int] | set[int] = frozenset()) -> str:
    """An HTML table; the cells are HTML already (escape text with :func:`_e`); columns ``numeric`` align right."""
    top = "".join(f"<th>{h}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{c}</td>" for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{top}</tr>{body}</table>"


def _chart(figure: Any, name: str) -> str:
    figure.update_layout(margin={"l": 60, "r": 20, "t": 40, "b": 60}, title={"text": name})
    figure.update_xaxes(separatethousands=True)
    figure.update_yaxes(separatethousands=True)
    height = figure.layout.height or 360
    inner = figure.to_html(full_html=False, include_plotlyjs=False, config=CONFIG, default_height=f"{height}px")
    return f"<div class='chart' data-chart='{_e(name)}'>{inner}</div>"


def _go() -> Any:
    return extras.load("plotly.graph_objects", "curator-slurm report (its charts)", "report")


def _when(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds)


#: Tick steps of a time axis, in seconds: whole seconds, minutes, hours, days.
_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)


def date_axis(figure: Any, start: float, end: float) -> None:
    """Human ticks on the time axis of ``figure`` spanning ``start`` to ``end`` (seconds since the epoch):
    about eight ticks on whole seconds, minutes, hours or days, written as a clock reads (``14:05:30``, not
    ``14:05:59.9996``), with the date once the span passes a day."""
    span = max(end - start, 1.0)
    step = next((s for s in _STEPS if span / s <= 8), _STEPS[-1])
    fmt = "%H:%M:%S" if step < 60 else "%H:%M" if span < 86400 else "%b %d %H:%M"
    figure.update_xaxes(type="date", tickformat=fmt, dtick=step * 1000, hoverformat="%Y-%m-%d %H:%M:%S")


def whole_ticks(figure: Any, axis: str, largest: int) -> None:
    """Ticks on whole numbers of a count axis (no ``0.5`` task) while its counts are small."""
    if largest <= 10:
        figure.update_xaxes(dtick=1) if axis == "x" else figure.update_yaxes(dtick=1)


#: Drop reasons listed in the overview (the largest first).
REASONS = 30
_COLORS = {"phase": "#37474f", "array": "#1e88e5", "process": "#90caf9"}


def overview(data: dict[str, Any]) -> list[str]:
    """The workflow's numbers (records in, documents and tokens out), its funnel of steps, and why documents
    were dropped."""
    n = data["numbers"]
    state = "complete" if n["complete"] else "not complete (the numbers so far)"
    facts = [("records in", _num(n["records"])), ("documents out", _num(n["documents"])),
             ("tokens out", _num(n["tokens"])), ("state", state)]  # fmt: skip
    cells = "".join(
        f"<div class='fact{' bad' if k == 'state' and not n['complete'] else ''}'>{_e(k)}<b>{_e(v)}</b></div>"
        for k, v in facts
    )
    parts = ["<h2>overview</h2>", f"<div class='facts' id='overview'>{cells}</div>"]
    steps = n["funnel"]
    if steps:
        go = _go()
        labels = ["records"] + [f"{s['phase']}: {s['stage']}" for s in steps]
        values = [n["records"] or 0] + [s["documents_out"] for s in steps]
        figure = go.Figure(go.Funnel(y=labels, x=values, textinfo="value+percent initial"))
        figure.update_layout(height=120 + 32 * len(labels))
        parts.append(_chart(figure, "documents after each step"))
        rows = [[_e(s["phase"]), _e(s["stage"]), _num(s["documents_in"]), _num(s["removed"]),
                 _num(s["documents_out"])] for s in steps]  # fmt: skip
        parts.append(_table(["phase", "step", "documents in", "removed", "documents out"], rows, {2, 3, 4}))
    parts += _distributions(n.get("length_log2") or [], n.get("token_log2") or [])
    reasons = list(n.get("reasons", {}).items())
    if reasons:
        parts.append("<h3>why documents were dropped</h3>")
        rows = [[_e(cause), _num(count)] for cause, count in reasons[:REASONS]]
        more = f"<p>... and {len(reasons) - REASONS} more causes</p>" if len(reasons) > REASONS else ""
        parts += [_table(["stage: cause", "documents"], rows, {1}), more]
    return parts


def _distributions(lengths: list[int], tokens: list[int]) -> list[str]:
    """Bars of the written documents' lengths and tokens, one per log2 bucket (``runs.stats``)."""
    out = []
    for counts, unit, name in ((lengths, "bytes", "document length"), (tokens, "tokens", "tokens per document")):
        if not any(counts):
            continue
        first = next(k for k, c in enumerate(counts) if c)
        labels = [_bucket_label(k, unit) for k in range(first, len(counts))]
        go = _go()
        figure = go.Figure(go.Bar(x=labels, y=counts[first:]))
        figure.update_layout(xaxis={"title": f"{unit} per document", "type": "category"}, yaxis_title="documents")
        whole_ticks(figure, "y", max(counts))
        out.append(_chart(figure, f"{name} of the documents written"))
    return out


def _bucket_label(k: int, unit: str) -> str:
    """``512-1,023`` (tokens) or ``1 KiB-2 KiB`` (bytes): the values log2 bucket ``k`` holds."""
    if k == 0:
        return "0"
    low, high = 1 << (k - 1), (1 << k) - 1
    if unit == "bytes" and low >= 1024:
        return f"{_bytes(low)}-{_bytes(high + 1)}"
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def timeline_part(bars: list[dict[str, Any]]) -> list[str]:
    """A bar per phase, array and process, on a clock axis (a process: from about the start of its first
    source task to its last record)."""
    if not bars:
        return []
    go = _go()
    labels = [f"{b['phase']}: {b['label']}" if b["kind"] != "phase" else b["label"] for b in bars]
    figure = go.Figure(
        go.Bar(
            y=labels,
            base=[_when(b["start"]) for b in bars],
            x=[max(b["end"] - b["start"], 0.5) * 1000 for b in bars],
            orientation="h",
            marker_color=["#c62828" if b["failed"] else _COLORS[b["kind"]] for b in bars],
            customdata=[[b["done"], b["failed"]] for b in bars],
            hovertemplate="%{y}<br>%{base} for %{x:,.0f} ms<br>%{customdata[0]} done, %{customdata[1]} failed",
            name="",
        )
    )
    figure.update_layout(height=120 + 18 * len(bars), yaxis={"autorange": "reversed", "type": "category"})
    date_axis(figure, min(b["start"] for b in bars), max(b["end"] for b in bars))
    shown = sum(b["kind"] == "process" for b in bars)
    note = "<p>phases dark, arrays blue, processes light (red: with failed source tasks); " + (
        f"the first {shown} processes are drawn</p>")  # fmt: skip
    return ["<h2>timeline</h2>", _chart(figure, "phases, arrays and processes"), note]


def nodes_part(nodes: list[dict[str, Any]]) -> list[str]:
    """A row per node: processes, source tasks done and failed, seconds of work, documents in, throughput."""
    if not nodes:
        return []
    rows = [
        [_e(n["host"]), _num(n["processes"]), _num(n["done"]),
         f"<span class='bad'>{_num(n['failed'])}</span>" if n["failed"] else "0", _num(n["seconds"], 1),
         _num(n["rows_in"]), _num(n["docs_per_second"], 1)]
        for n in nodes
    ]  # fmt: skip
    head = ["node", "processes", "tasks done", "failed", "seconds of work", "docs in", "docs/s"]
    return ["<h2>nodes</h2>", f"<div id='nodes'>{_table(head, rows, {1, 2, 3, 4, 5, 6})}</div>"]


def accounting_part(acct: dict[str, Any]) -> list[str]:
    """Each array's memory high-water mark, CPU efficiency and queue wait, or why Slurm cannot say."""
    if not acct.get("available"):
        return ["<h2>Slurm accounting</h2>",
                f"<p id='accounting'>Slurm accounting not available: {_e(acct.get('reason'))}</p>"]  # fmt: skip
    rows = [
        [_e(a["job"]), _num(a["tasks"]), _e(", ".join(f"{n} {s}" for s, n in a["states"].items())),
         _bytes(a["max_rss"]), "-" if a["cpu_efficiency"] is None else f"{100 * a['cpu_efficiency']:.1f} %",
         _seconds(a["wait_median"]), _seconds(a["wait_max"]), _e(", ".join(a["nodes"][:5]))]
        for a in acct["arrays"]
    ]  # fmt: skip
    head = ["array job", "tasks", "states", "MaxRSS (largest)", "CPU efficiency", "queue wait (median)",
            "queue wait (max)", "nodes"]  # fmt: skip
    return ["<h2>Slurm accounting</h2>", f"<div id='accounting'>{_table(head, rows, {1, 3, 4, 5, 6})}</div>"]


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return "-"


def _seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 60:
        return f"{s:.0f} s"
    return f"{s / 60:.1f} min" if s < 3600 else f"{s / 3600:.1f} h"


__all__ = ["accounting_part", "date_axis", "nodes_part", "overview", "timeline_part", "whole_ticks"]

"""Small sums that several parts of a run's reporting share: a shard's row of the status table, and the
object-store request counts of records added up and described."""

from __future__ import annotations

from typing import Any

from curator_slurm.runs.readfile import count as _count


def count(value: Any) -> int:
    """``value`` when it is a whole number of at least 0, else 0."""
    return _count(value) or 0


def shard_row(label: str, job: str | None) -> dict[str, Any]:
    """A row of the status table for a shard that has recorded nothing yet."""
    return {"shard": label, "done": 0, "failed": 0, "seconds": 0.0, "rows_in": 0, "job": job, "taken": 0}


def add_s3_counts(total: dict[str, Any] | None, part: dict[str, Any] | None) -> dict[str, Any] | None:
    """``total`` plus ``part`` (either may be None; counts of the wrong type in ``part``, a damaged record's,
    count 0)."""
    if not part or not isinstance(part, dict):
        return total
    out = dict(total or {"requests": 0, "retries": 0, "reasons": {}})
    out["requests"] += count(part.get("requests"))
    out["retries"] += count(part.get("retries"))
    out["reasons"] = dict(out["reasons"])
    reasons = part.get("reasons")
    for k, v in reasons.items() if isinstance(reasons, dict) else ():
        out["reasons"][str(k)] = out["reasons"].get(str(k), 0) + count(v)
    if count(part.get("gave_up")):
        out["gave_up"] = out.get("gave_up", 0) + part["gave_up"]
    return out


def describe_s3(counts: dict[str, Any] | None) -> str:
    """``"S3: 120 requests, 7 retried (throttled 4, connection reset 3)"``, or "" without requests."""
    if not counts:
        return ""
    why = ", ".join(f"{k} {v}" for k, v in sorted(counts.get("reasons", {}).items()))
    gave_up = f", {counts['gave_up']} gave up" if counts.get("gave_up") else ""
    return f"S3: {counts['requests']} requests, {counts['retries']} retried" + (f" ({why})" if why else "") + gave_up


def count_taken(takeover: dict[str, Any], row: dict[str, Any], owners: list[str | None]) -> None:
    """Count the done tasks of one ledger file (one shard's, ``row``) that it took over from their ``owners``."""
    for owner in owners:
        if owner is None:
            continue
        takeover["tasks"] += 1
        row["taken"] += 1
        takeover["by"][row["shard"]] = takeover["by"].get(row["shard"], 0) + 1
        takeover["from"][owner] = takeover["from"].get(owner, 0) + 1


__all__ = ["add_s3_counts", "count_taken", "describe_s3", "shard_row"]

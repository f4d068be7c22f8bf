"""Comparing run fingerprints: a fingerprint's digest, and the first difference between two, in words."""

from __future__ import annotations

import json
from typing import Any

import xxhash


def fingerprint_digest(fingerprint: dict[str, Any]) -> str:
    return xxhash.xxh64_hexdigest(json.dumps(fingerprint, sort_keys=True, default=str).encode("utf-8"))


def _first_difference(was: Any, now: Any, path: str) -> tuple[str, Any, Any] | None:
    """Where two canonical parameter values first differ: the dotted path (a nested filter's attribute as
    ``filter_obj._words``) and the two values there; None when they are equal."""
    if was == now:
        return None
    both = isinstance(was, dict) and isinstance(now, dict)
    if both and was.get("type") == now.get("type") and was.get("stage") == now.get("stage"):
        for key in sorted(set(was) | set(now)):
            transparent = (key == "attributes" and "type" in was) or (key == "params" and "stage" in was)
            below = path if transparent else f"{path}.{key}" if path else key
            found = _first_difference(was.get(key), now.get(key), below)
            if found is not None:
                return found
    return path, was, now


def _render(value: Any, limit: int = 300) -> str:
    """A canonical parameter value as a user wrote it: an object as ``Class(attr=value, ...)``."""
    described = _described(value)
    if described is not None:
        name, attributes = described
        text = f"{name}({', '.join(f'{k}={_render(v, limit)}' for k, v in attributes.items())})"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k!r}: {_render(v, limit)}" for k, v in value.items()) + "}"
    elif isinstance(value, list):
        text = "[" + ", ".join(_render(v, limit) for v in value) + "]"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _described(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(name, attributes) of a canonical object (``{"type", "attributes"}``) or of a nested stage, a filter held
    by another (``{"stage", "params"}``); None for any other value."""
    if isinstance(value, dict) and set(value) == {"type", "attributes"} and isinstance(value["attributes"], dict):
        return str(value["type"]), value["attributes"]
    if isinstance(value, dict) and set(value) == {"stage", "params"} and isinstance(value["params"], dict):
        return str(value["stage"]), value["params"]
    return None


def difference(old: Any, new: dict[str, Any]) -> str:
    """The first difference between two fingerprints, in words."""
    if not isinstance(old, dict):
        return "the recorded fingerprint is unreadable"
    if old.get("id_scheme", 1) != new.get("id_scheme", 1):
        return (
            f"it was written with source-task id scheme {old.get('id_scheme', 1)} (1: absolute paths), this "
            f"version uses scheme {new.get('id_scheme', 1)} (2: paths relative to the reader's root), so none of "
            "its records can match"
        )
    if old.get("fingerprint_scheme", 1) != new.get("fingerprint_scheme", 1):
        return (
            f"it was written with fingerprint scheme {old.get('fingerprint_scheme', 1)} (1: each stage named by its "
            "class's module path, other values by their repr, which can differ from process to process), this "
            f"version uses scheme {new.get('fingerprint_scheme', 1)} (2: each stage's declared name and its "
            "parameters with sets and dicts sorted), so the two cannot be compared even for the same pipeline. "
            "To finish that run, use the curator-slurm version that started it; to go on with this one, start "
            "afresh (the outputs are written again under the same names)"
        )
    if old.get("version") != new.get("version"):
        return (
            f"it was started by curator-slurm {old.get('version') or 'before 0.2.0'}, this is {new.get('version')}, "
            "whose stages may write other outputs: finish that run with the version that started it, or start "
            "afresh"
        )
    if old.get("name") != new.get("name"):
        return f"pipeline name was {old.get('name')!r}, now {new.get('name')!r}"
    before, after = old.get("stages", []), new.get("stages", [])
    if [s.get("name") for s in before] != [s.get("name") for s in after]:
        return f"stages were {[s.get('name') for s in before]}, now {[s.get('name') for s in after]}"
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        before_params, after_params = b.get("params", {}), a.get("params", {})
        found = _first_difference(before_params, after_params, "")
        if found is not None:
            key = found[0].split(".")[0]
            where = (
                f" (they differ at {found[0]}: {_render(found[1])} then, {_render(found[2])} now)"
                if "." in found[0]
                else ""
            )
            return (
                f"stage {i} {a.get('name')!r}: {key} was {_render(before_params.get(key))}, "
                f"now {_render(after_params.get(key))}{where}"
            )
        code = _code_difference(b.get("code") or {}, a.get("code") or {})
        if code:
            return f"stage {i} {a.get('name')!r}: {code}"
    return "the fingerprints differ"


def _code_difference(before: dict[str, str], after: dict[str, str]) -> str:
    """The user code that changed between two stage fingerprints, in words ('' when none did)."""
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    if changed:
        return (
            f"the code of {', '.join(changed[:3])} changed since the run started (its outputs would mix two "
            "versions of it)"
        )
    gone, new = sorted(before.keys() - after.keys()), sorted(after.keys() - before.keys())
    if gone or new:
        return f"it is made of other code now (was {', '.join(gone[:3]) or 'none'}, now {', '.join(new[:3]) or 'none'})"
    return ""


__all__ = ["difference", "fingerprint_digest"]

"""Optional features and the extras that install them: a class's ``requires``, checked as it is built, and
:func:`load` on first use (design: docs/design.md, "Optional extras")."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import re
from types import ModuleType

from .errors import CuratorError

#: Import names whose distribution is named otherwise (beyond ``_`` for ``-``).
_DISTRIBUTION_OF = {"fasttext": "fasttext-numpy2-wheel"}
#: Extras that only gather others: never the one a message names.
_GATHERING = frozenset({"all", "dev"})


@functools.lru_cache(maxsize=1)
def _extras_of_distributions() -> dict[str, str]:
    """Each optional distribution and the smallest extra that brings it, as the installed package's metadata
    (``pyproject.toml``) declares them: the one table, not a copy of it."""
    found: dict[str, list[str]] = {}
    try:
        requirements = importlib.metadata.requires("curator-slurm") or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        requirements = []
    for line in requirements:
        match = re.match(r"\s*([A-Za-z0-9_.-]+).*;\s*extra\s*==\s*[\"']([^\"']+)[\"']", line)
        if match and match.group(2) not in _GATHERING:
            found.setdefault(_normal(match.group(1)), []).append(match.group(2))
    counts = {extra: sum(extra in extras for extras in found.values()) for extras in found.values() for extra in extras}
    return {dist: min(extras, key=lambda e: (counts[e], e)) for dist, extras in found.items()}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_of(module: str) -> str:
    """The extra of this package that installs ``module`` (its top-level package): ``"all"`` if none names it."""
    top = module.split(".")[0]
    return _extras_of_distributions().get(_normal(_DISTRIBUTION_OF.get(top, top)), "all")


class MissingExtraError(CuratorError, ImportError):
    """A feature was asked for whose optional package is not installed; the message gives the pip command."""


def install_command(extra: str) -> str:
    """The pip command that installs ``extra`` of this package as it was installed: the package is on no index,
    so from the checkout (editable or not) or the wheel it came from, as pip recorded it (``direct_url.json``);
    from a checkout's ``.`` when that is unknown (run from a source tree)."""
    import json
    from urllib.parse import unquote, urlparse

    try:
        record = json.loads(importlib.metadata.distribution("curator-slurm").read_text("direct_url.json") or "{}")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        record = {}
    url = urlparse(str(record.get("url", "")))
    if url.scheme == "file" and url.path:
        editable = "-e " if record.get("dir_info", {}).get("editable") else ""
        return f"pip install {editable}'{unquote(url.path)}[{extra}]'"
    if url.scheme:  # a URL (a git repository, an archive): the same, as a direct reference
        vcs = record.get("vcs_info", {}).get("vcs")
        return f"pip install 'curator-slurm[{extra}] @ {vcs + '+' if vcs else ''}{url.geturl()}'"
    return f"pip install -e '.[{extra}]' (in a curator-slurm checkout; or pip install 'WHEEL[{extra}]' with its wheel)"


def _message(module: str, feature: str, extra: str | None) -> str:
    extra = extra or extra_of(module)
    return (
        f"{feature} needs the Python package {module.split('.')[0]!r}, which is not installed; its extra "
        f"[{extra}] installs it: {install_command(extra)}"
    )


def require(module: str, feature: str, extra: str | None = None) -> None:
    """Fail now, with the pip command, unless ``module`` can be imported; does not import it."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module without a spec
        found = False
    if not found:
        raise MissingExtraError(_message(module, feature, extra))


def load(module: str, feature: str, extra: str | None = None) -> ModuleType:
    """``import module``; a missing package is a :class:`MissingExtraError` with the pip command, and an
    import that fails for another reason (a broken dependency) keeps that reason in the message."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.split(".")[0] == e.name.split(".")[0]:
            raise MissingExtraError(_message(module, feature, extra)) from e
        raise MissingExtraError(
            f"{feature}: importing {module!r} failed because {e.name!r} is missing ({e}); "
            f"{install_command(extra or extra_of(module))} installs what the extra needs"
        ) from e


def require_all(modules: tuple[str, ...], owner: str) -> None:
    """:func:`require` each of ``modules`` for ``owner`` (a class's declared ``requires``)."""
    for module in modules:
        require(module, owner)

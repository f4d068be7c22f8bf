"""Optional features and the extras that install them: a stage or executor calls :func:`require` when it is built,
and imports the module only when it first runs. Design: docs/design.md, "Settings"."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from .errors import CuratorError

#: Which extra brings which importable module (the README's table of extras says the same).
EXTRA_OF: dict[str, str] = {
    "ray": "ray",
    "pycld2": "lang",
    "fasttext": "fasttext",
    "ftfy": "unicode",
    "fastwarc": "web",
    "trafilatura": "web",
    "resiliparse": "web",
    "justext": "web",
    "lxml_html_clean": "web",
    "tokenizers": "tokenize",
    "spacy": "fineweb",
    "tldextract": "fineweb",
    "fsspec": "fsspec",
    "plotly": "report",
}


class MissingExtraError(CuratorError, ImportError):
    """A feature was asked for whose optional package is not installed; the message gives the pip command."""


def _message(module: str, feature: str, extra: str | None) -> str:
    extra = extra or EXTRA_OF.get(module.split(".")[0], "all")
    return (
        f"{feature} needs the Python package {module.split('.')[0]!r}, which is not installed: "
        f"pip install 'curator-slurm[{extra}]'"
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
            f"pip install 'curator-slurm[{extra or EXTRA_OF.get(module.split('.')[0], 'all')}]' installs "
            "what the extra needs"
        ) from e

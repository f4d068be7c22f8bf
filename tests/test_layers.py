"""The package's layering, read from the source: every import outside ``if TYPE_CHECKING:`` (function-level
imports included, since they run too) goes down the layers or sideways, never up, and no module imports
itself back through others.

Layers, from the ground up: tasks, shard/settings, fs -> stages (text kernels -> the stage contract -> the
catalogue by role: io, extractors, filters, modifiers -> the re-exporting package) -> runs -> backends ->
pipeline -> workflows -> slurm -> cli. ``runs/`` and ``stages/`` in particular import nothing from ``slurm/``,
``backends/``, ``workflows/`` or ``cli``: what a run leaves on disk and what a stage computes do not depend on
where or how the run executes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "curator_slurm"

#: Each room of the package (a module or package, by its dotted name under the package; a module belongs to the
#: longest room that contains it) and its layer; a room may import its own layer and the ones below. The
#: package's ``__init__`` is the public face: it sits with the CLI at the top, as ``stages/__init__`` sits above
#: the catalogue it re-exports.
LAYERS: dict[str, int] = {
    "_lazy": 0,
    "_version": 0,
    "errors": 0,
    "extras": 0,
    "logs": 0,
    "tasks": 0,
    "shard": 0,
    "settings": 0,
    "fs": 0,
    "samples": 0,
    "stages.text": 1,
    "stages.base": 2,
    "stages.params": 2,
    "stages.notes": 2,
    "stages.code": 2,
    "stages.positions": 3,
    "stages.io": 3,
    "stages.extractors": 3,
    "stages.filters": 3,
    "stages.modifiers": 3,
    "stages": 4,
    "stages.datatrove": 4,
    "runs": 5,
    "backends": 6,
    "pipeline": 7,
    "workflows": 8,
    "slurm": 9,
    "cli": 10,
    "nemo": 10,
    "": 10,
}

#: What ``runs/`` and ``stages/`` must never import, whatever the layer numbers say.
FORBIDDEN_BELOW = {"runs": {"slurm", "backends", "workflows", "cli"}}
FORBIDDEN_BELOW["stages"] = FORBIDDEN_BELOW["runs"] | {"runs", "pipeline"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree`` but those under ``if TYPE_CHECKING:`` (their ``else`` counts)."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                todo.extend(child.orelse)
            elif isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            else:
                todo.append(child)
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[tuple[str, int]]:
    """(imported module of this package, line) for every import in ``path``; ``from pkg import x`` names
    the module ``pkg.x`` when ``x`` is a module, else ``pkg`` itself."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[tuple[str, int]] = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names]
        for target in targets:
            while target and target not in modules:  # `import a.b.c` of a name inside a module: the module
                target = target.rpartition(".")[0]
            if target.split(".")[0] == PACKAGE and target != name:
                out.add((target, node.lineno))
    return out


def room(module: str) -> str:
    """The layer room of a module: ``stages.io`` for ``curator_slurm.stages.io.warc``, ``stages`` for the
    ``stages`` package itself, "" for the package."""
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return ".".join(parts[:n])
    return parts[0] if parts else ""


def top(module: str) -> str:
    """The top-level room of a module (``stages`` for ``curator_slurm.stages.io.warc``)."""
    return room(module).split(".")[0]


@pytest.fixture(scope="module")
def graph() -> dict[str, set[tuple[str, int]]]:
    modules = all_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_every_module_has_a_layer(graph: dict[str, set[tuple[str, int]]]) -> None:
    unknown = sorted({room(m) for m in graph} - set(LAYERS))
    assert unknown == [], f"give these rooms a layer in tests/test_layers.py LAYERS: {unknown}"


def test_nothing_imports_upwards(graph: dict[str, set[tuple[str, int]]]) -> None:
    upward = [
        f"{src} (line {line}) imports {dst}: {room(src) or PACKAGE} is below {room(dst) or PACKAGE}"
        for src, targets in sorted(graph.items())
        for dst, line in sorted(targets)
        if LAYERS.get(room(dst), 0) > LAYERS.get(room(src), 0)
    ]
    assert upward == [], "\n".join(upward)


@pytest.mark.parametrize("low", sorted(FORBIDDEN_BELOW))
def test_runs_and_stages_import_nothing_of_the_executing_layers(
    graph: dict[str, set[tuple[str, int]]], low: str
) -> None:
    bad = [
        f"{src} (line {line}) imports {dst}"
        for src, targets in sorted(graph.items())
        if top(src) == low
        for dst, line in sorted(targets)
        if top(dst) in FORBIDDEN_BELOW[low] or dst == PACKAGE
    ]
    assert bad == [], "\n".join(bad)


def test_no_import_cycle(graph: dict[str, set[tuple[str, int]]]) -> None:
    """Depth-first search for a back edge in the module graph; the message spells out the cycle."""
    edges = {src: sorted({dst for dst, _ in targets}) for src, targets in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []
    cycles: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in edges.get(node, []):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert cycles == [], "\n".join(cycles)


def test_the_checker_sees_what_it_must(tmp_path: Path) -> None:
    """The parser counts function-level and relative imports, and skips only ``if TYPE_CHECKING:``."""
    pkg = tmp_path / PACKAGE / "runs"
    pkg.mkdir(parents=True)
    source = pkg / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from curator_slurm.cli import main\n"
        "def f():\n    from ..slurm import submit\n"
        "import curator_slurm.backends.run\n"
    )
    modules = {
        f"{PACKAGE}.runs.probe": source,
        f"{PACKAGE}.slurm": source,
        f"{PACKAGE}.slurm.submit": source,
        f"{PACKAGE}.backends.run": source,
        f"{PACKAGE}.cli": source,
    }
    found = imports_of(f"{PACKAGE}.runs.probe", source, modules)
    assert found == {(f"{PACKAGE}.slurm.submit", 5), (f"{PACKAGE}.backends.run", 6)}

"""Size limits the lead holds the code to, read from the source: no function over 80 lines (its whole span,
decorators to last line, docstring included) and no module over 800 (merge what belongs together rather
than split to dodge it). ``make lint`` also runs ruff's
PLR0915 (too many statements, pyproject's ``max-statements``), which catches the dense ones below that."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 800


def sources() -> list[Path]:
    return sorted((ROOT / "src").rglob("*.py"))


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES, root: Path = ROOT) -> list[str]:
    """``path:line name (N lines)`` for every function or method of ``path`` longer than ``limit`` lines."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > limit:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_over_80_lines() -> None:
    offenders = [line for path in sources() for line in long_functions(path)]
    assert offenders == [], "split these functions:\n" + "\n".join(offenders)


def test_no_module_is_over_800_lines() -> None:
    offenders = [
        f"{p.relative_to(ROOT)} ({n} lines)"
        for p in sources()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert offenders == [], "split these modules:\n" + "\n".join(offenders)


def test_the_length_check_counts_decorators_and_every_line(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 2))
    fits = f"@functools.cache\ndef fits():\n{body}\n"  # 80 lines with its decorator
    over = f"@functools.cache\ndef over():\n{body}\n    return 1\n"
    probe.write_text(f"import functools\n\n\n{fits}\n\n{over}")
    assert long_functions(probe, root=tmp_path) == [f"probe.py:{MAX_FUNCTION_LINES + 7} over (81 lines)"]

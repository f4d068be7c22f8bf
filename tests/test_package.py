"""Packaging promises: light import, no heavy dependencies, Slurm confined to slurm/ and backends/."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from support.helpers import REPO


def test_import_is_light() -> None:
    """`import curator_slurm` pulls in neither Ray nor torch nor pandas."""
    code = (
        "import sys, curator_slurm, curator_slurm.stages; "
        "print(sorted(m for m in ('ray', 'torch', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_import_installs_no_import_hook() -> None:
    """`import curator_slurm` (and its catalogue) leaves the import system as it found it: no finder added."""
    code = (
        "import sys; before = list(sys.meta_path); import curator_slurm, curator_slurm.stages; "
        "print([type(f).__name__ for f in sys.meta_path if f not in before])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _requirement_names(dist: str, extras: frozenset[str] = frozenset()) -> set[str]:
    """The distributions `dist` requires, with those of the named extras (and none of the others)."""
    names = set()
    for req in metadata.requires(dist) or []:
        marker = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if marker and marker.group(1) not in extras:
            continue
        names.add(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def _dependency_closure(root_extras: frozenset[str]) -> set[str]:
    seen: set[str] = set()
    todo = ["curator-slurm"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            todo.extend(_requirement_names(name, root_extras if name == "curator-slurm" else frozenset()))
        except metadata.PackageNotFoundError:
            continue
    return seen


def test_core_dependencies_are_light() -> None:
    """A bare install needs pyarrow and xxhash; Ray and the web stack are extras, not core."""
    core = _dependency_closure(frozenset())
    assert {"pyarrow", "xxhash", "numpy"} <= core
    assert not core & {"ray", "trafilatura", "fastwarc", "spacy", "tokenizers", "torch", "pandas"}, sorted(core)


def test_no_extra_pulls_in_torch_and_only_one_pulls_in_pandas() -> None:
    """Every extra together ([all]) stays clear of torch, transformers and tensorflow; pandas comes only with the
    extra named for it (NeMo's pandas stages), never through another feature's extra."""
    extras = frozenset(metadata.metadata("curator-slurm").get_all("Provides-Extra") or [])
    assert {"ray", "web", "tokenize", "fineweb", "fasttext", "pandas"} <= extras
    everything = _dependency_closure(extras - {"dev"})
    assert {"pyarrow", "xxhash", "ray", "trafilatura", "tokenizers", "spacy", "pandas"} <= everything
    assert not everything & {"torch", "transformers", "tensorflow"}, sorted(everything)
    without_pandas = _dependency_closure(extras - {"dev", "all", "pandas"})
    assert "pandas" not in without_pandas, sorted(without_pandas)


def test_stages_never_mention_slurm() -> None:
    """`grep -ri slurm src/curator_slurm/stages`, beyond the package's own name, prints nothing: no stage knows
    where it runs."""
    stages = REPO / "src" / "curator_slurm" / "stages"
    offenders = [str(p) for p in stages.rglob("*.py") if "slurm" in p.read_text().lower().replace("curator_slurm", "")]
    assert offenders == []


def test_only_env_module_reads_the_environment() -> None:
    """The environment is read in one place (settings.py), so workers need no inherited variables."""
    src = REPO / "src" / "curator_slurm"
    readers = {
        str(p.relative_to(src)) for p in src.rglob("*.py") if re.search(r"os\.environ|os\.getenv", p.read_text())
    }
    assert readers == {"settings.py", "__init__.py"}, readers
    # The package's __init__ only writes defaults for numpy's BLAS threads, before pyarrow loads numpy (it must
    # run before any import that reads them); it reads nothing.
    init = (src / "__init__.py").read_text()
    assert re.findall(r"os\.environ\.?\w*", init) == ["os.environ.setdefault"], init
    assert re.search(r'for _name in \("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"\)', init)


def test_console_script_reports_version() -> None:
    exe = Path(sys.executable).parent / "curator-slurm"
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"curator-slurm {metadata.version('curator-slurm')}"

"""The core install: ``pip install .`` into a fresh venv (no system site-packages) brings pyarrow, xxhash, numpy
and loguru and no optional package; the demo (``examples/curate.py``, what ``make demo`` runs) works on it; a
feature whose extra is missing fails before any work, naming the pip command that installs the extra from where the
package came from (this checkout: ``pip install '<checkout>[<extra>]'``; the package is on no index).

It builds and installs the package for real (a minute or so: the dependencies come from pip's cache or the
configured index), once for the module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
CORE = {"pyarrow", "xxhash", "numpy", "loguru"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def optional_packages() -> set[str]:
    """Every package an extra of pyproject.toml names (the dev tools included), but the package itself."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {_name(r) for reqs in extras.values() for r in reqs} - {"curator-slurm"}


def venv_env() -> dict[str, str]:
    """This environment without what would let the venv see the work tree or the shared venv."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("SLURM_", "CURATOR_"))}


@pytest.fixture(scope="module")
def core_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("core-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
        env=venv_env(),
    )
    assert proc.returncode == 0, proc.stderr
    return python


def run(python: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # Not the checkout's parent: `python -c` puts its working directory first on sys.path, and a parent such as
    # /tmp may hold a `ray` directory (Ray's session files) that then imports as a namespace package.
    # The directory that holds the core venv holds nothing else.
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, timeout=300, env=venv_env(),
        cwd=cwd or python.parents[2],
    )  # fmt: skip


def test_the_core_install_has_no_optional_package(core_python: Path) -> None:
    listed = run(core_python, "-m", "pip", "list", "--format=json")
    assert listed.returncode == 0, listed.stderr
    installed = {_name(p["name"]) for p in json.loads(listed.stdout)}
    assert {"curator-slurm", *CORE} <= installed
    assert {"ray", "ftfy", "pycld2"} & installed == set()
    assert optional_packages() & installed == set(), sorted(optional_packages() & installed)
    where = run(core_python, "-c", "import curator_slurm; print(curator_slurm.__file__)")
    assert "site-packages" in where.stdout and str(ROOT / "src") not in where.stdout, where


def test_the_demo_runs_on_the_core_install(core_python: Path, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    made = run(core_python, "-m", "curator_slurm.samples.corpus", str(data), "--files", "4", "--docs-per-file", "50")
    assert made.returncode == 0, made.stderr
    demo = run(core_python, str(ROOT / "examples" / "curate.py"), "--input", str(data), "--output", str(out))
    assert demo.returncode == 0, demo.stderr
    assert re.search(r"curate: 4 files written, 200 docs in", demo.stdout), demo.stdout
    assert len(list(out.glob("*.parquet"))) == 4


@pytest.mark.parametrize(
    ("code", "extra"),
    [
        ("from curator_slurm.stages import LanguageFilter; LanguageFilter(languages='en')", "lang"),
        ("from curator_slurm.stages import UnicodeReformatter; UnicodeReformatter()", "unicode"),
        ("from curator_slurm.backends.ray import RayExecutor; RayExecutor()", "ray"),
        ("from curator_slurm.backends import make_executor; make_executor('ray')", "ray"),
        ("from curator_slurm.stages import FastTextClassifierFilter; FastTextClassifierFilter('m.bin')", "fasttext"),
        ("from curator_slurm.stages import LanguageFilter as L; L(backend='ft176', model_path='')", "fasttext"),
        ("from curator_slurm.stages import WarcReader; WarcReader('.')", "web"),
        ("from curator_slurm.stages import TrafilaturaExtractor; TrafilaturaExtractor()", "web"),
        ("from curator_slurm.stages import ResiliparseExtractor; ResiliparseExtractor()", "web"),
        ("from curator_slurm.stages import JusTextExtractor; JusTextExtractor()", "web"),
    ],
    ids=[
        "lang",
        "unicode",
        "ray",
        "ray-by-name",
        "fasttext-classifier",
        "fasttext-language",
        "warc",
        "trafilatura",
        "resiliparse",
        "justext",
    ],
)
def test_a_feature_without_its_extra_fails_at_once_with_the_pip_command(
    core_python: Path, code: str, extra: str
) -> None:
    proc = run(core_python, "-c", code)
    assert proc.returncode == 1
    assert "MissingExtraError" in proc.stderr
    assert f"pip install '{ROOT}[{extra}]'" in proc.stderr, proc.stderr


def test_the_web_example_names_the_extras_it_needs_before_any_work(core_python: Path, tmp_path: Path) -> None:
    """examples/curate_web.py uses LanguageFilter and UnicodeReformatter ([lang], [unicode]; the README says so):
    on the core install it stops before reading anything, with the command that installs what is missing."""
    data, out = tmp_path / "web", tmp_path / "out"
    example = str(ROOT / "examples" / "curate_web.py")
    made = run(core_python, example, "--make-sample", str(data), "--files", "2", "--docs-per-file", "20")
    assert made.returncode == 0, made.stderr
    proc = run(core_python, example, "--input", str(data), "--output", str(out))
    assert proc.returncode == 2, proc.stderr
    assert re.search(rf"pip install '{re.escape(str(ROOT))}\[(unicode|lang)\]'", proc.stderr), proc.stderr
    assert not out.exists(), "nothing was written"


def test_report_without_its_extra_fails_with_the_pip_command(core_python: Path, tmp_path: Path) -> None:
    """`curator-slurm report` on the core install says how to get its charts, before it reads any ledger."""
    (tmp_path / "run" / "ledger").mkdir(parents=True)
    proc = run(core_python.parent / "curator-slurm", "report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html"))
    assert proc.returncode == 2 and f"pip install '{ROOT}[report]'" in proc.stderr, proc.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_class_declares_what_it_needs_once_and_is_refused_as_it_is_built() -> None:
    """``requires`` on a stage or executor class is checked when one is built (before any work), with the pip
    command of the extra that ``pyproject.toml`` (the installed metadata) says brings the module."""
    from curator_slurm.backends.run import BaseExecutor
    from curator_slurm.extras import MissingExtraError, extra_of
    from curator_slurm.stages.base import ProcessingStage

    class NeedsNothingThere(ProcessingStage):
        requires = ("no_such_module_for_curator",)

    class NeedsTldextract(ProcessingStage):
        requires = ("tldextract",)

    class RemoteExecutor(BaseExecutor):
        requires = ("no_such_module_for_curator",)

    with pytest.raises(MissingExtraError, match=r"NeedsNothingThere needs .*'no_such_module_for_curator'.*\[all\]"):
        NeedsNothingThere()
    with pytest.raises(MissingExtraError, match="RemoteExecutor needs"):
        RemoteExecutor()
    assert isinstance(NeedsTldextract(), NeedsTldextract)  # installed in the dev extra
    # Each module's extra, as pyproject.toml declares it: the smallest extra that brings it.
    assert [extra_of(m) for m in ("ray", "pycld2", "fasttext", "lxml_html_clean", "plotly.offline", "spacy")] == [
        "ray",
        "lang",
        "fasttext",
        "web",
        "report",
        "fineweb",
    ]


def test_the_command_a_missing_extra_names_installs_it(core_python: Path) -> None:
    """The hint is a command that works (the package is on no index, so ``pip install 'curator-slurm[x]'``
    would not): pip resolves it, from the checkout the core install came from, to the extra's packages
    (``--dry-run``: the core venv stays without them)."""
    proc = run(core_python, "-c", "from curator_slurm.stages import UnicodeReformatter; UnicodeReformatter()")
    match = re.search(r"pip install (-e )?'([^']+)\[unicode\]'", proc.stderr)
    assert match, proc.stderr
    resolved = subprocess.run(
        [str(core_python), "-m", "pip", "install", "--dry-run", f"{match.group(2)}[unicode]"],
        capture_output=True,
        text=True,
        timeout=900,
        env=venv_env(),
    )
    assert resolved.returncode == 0, resolved.stderr
    assert re.search(r"Would install .*\bftfy-", resolved.stdout), resolved.stdout

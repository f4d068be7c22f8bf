"""The docs cannot rot: the tutorial runs on the real cluster, and the reference names everything.

Tutorial markup (docs/tutorial.md):

- ```` ```bash tutorial ```` blocks run, in order, in one bash session (``set -euo pipefail``) in a
  fresh temporary directory, with ``$REPO`` exported and this interpreter's ``bin`` first on ``PATH``.
- ```` ```python tutorial file=NAME ```` blocks are written to ``NAME`` at that point of the session.
- A ```` ```text expected ```` block is checked against the output (stdout and stderr together) of
  the closest ``bash tutorial`` block before it: each of its lines must appear, in order, each within
  one output line; ``...`` matches any text.
- Plain ```` ```bash ```` and ```` ```text ```` blocks are illustrations and are not run.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from curator_slurm.cli.commands import build_parser
from support.helpers import REPO

TUTORIAL = REPO / "docs" / "tutorial.md"
REFERENCE = REPO / "docs" / "reference.md"
SRC = REPO / "src" / "curator_slurm"

TUTORIAL_TIMEOUT = 600
MARKER = "@@@curator-doc-block"
ENV_NAME = re.compile(r"\b(?:CURATOR_[A-Z_]+|SLURM_[A-Z_]+|RAY_ADDRESS)")


# --- reading the tutorial -------------------------------------------------------------------------


@dataclass
class Block:
    """A fenced block of the tutorial: ``kind`` is ``bash``, ``file`` or ``expected``."""

    kind: str
    line: int  # 1-based line of the opening fence in the Markdown file
    text: str
    filename: str | None = None
    expected: list[str] = field(default_factory=list)


def parse_tutorial(markdown: str) -> list[Block]:
    """The runnable blocks in order, each ``bash`` block carrying the expected lines that follow it."""
    blocks: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^(\s*)(`{3,})(.*)$", lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, info = opening.group(1), opening.group(2), opening.group(3).split()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^\s*{fence}\s*$", lines[i]):
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        if i == len(lines):
            raise ValueError(f"{TUTORIAL.name}:{start + 1}: unclosed code fence")
        i += 1
        text = "\n".join(body) + "\n"
        if info[:2] == ["bash", "tutorial"]:
            blocks.append(Block("bash", start + 1, text))
        elif info[:2] == ["python", "tutorial"]:
            names = [w.split("=", 1)[1] for w in info[2:] if w.startswith("file=")]
            if len(names) != 1:
                raise ValueError(f"{TUTORIAL.name}:{start + 1}: a python tutorial block needs file=NAME")
            blocks.append(Block("file", start + 1, text, filename=names[0]))
        elif info[:2] == ["text", "expected"]:
            owner = next((b for b in reversed(blocks) if b.kind == "bash"), None)
            if owner is None:
                raise ValueError(f"{TUTORIAL.name}:{start + 1}: expected output before any bash tutorial block")
            owner.expected.extend(line.strip() for line in body if line.strip())
    return blocks


def pattern(expected_line: str) -> re.Pattern[str]:
    """An expected line as a regex: literal text, ``...`` for anything."""
    return re.compile(".*".join(re.escape(part) for part in expected_line.split("...")))


def missing_line(expected: list[str], output: str) -> str | None:
    """The first expected line that does not appear (in order) in ``output``, or None."""
    out_lines = output.splitlines()
    pos = 0
    for line in expected:
        regex = pattern(line)
        while pos < len(out_lines) and not regex.search(out_lines[pos]):
            pos += 1
        if pos == len(out_lines):
            return line
        pos += 1
    return None


def session_script(blocks: list[Block]) -> str:
    """One bash script that runs every block and prints a marker before each."""
    parts = ["set -euo pipefail", "exec 2>&1"]
    for n, block in enumerate(blocks):
        parts.append(f"echo '{MARKER} {n}@@@'")
        if block.kind == "file":
            eof = "CURATOR_DOC_EOF"
            assert eof not in block.text
            parts.append(f"cat > {block.filename} <<'{eof}'\n{block.text}{eof}")
        else:
            parts.append(block.text)
    parts.append(f"echo '{MARKER} end@@@'")
    return "\n".join(parts) + "\n"


def split_output(output: str) -> tuple[dict[int, str], bool]:
    """Output per block number, and whether the session got to its end."""
    pieces: dict[int, str] = {}
    finished = False
    current: int | None = None
    for line in output.splitlines(keepends=True):
        marker = re.fullmatch(rf"{MARKER} (\d+|end)@@@\n?", line)
        if marker:
            if marker.group(1) == "end":
                finished = True
                current = None
            else:
                current = int(marker.group(1))
                pieces[current] = ""
            continue
        if current is not None:
            pieces[current] += line
    return pieces, finished


def cancel_jobs_started_in(workdir: Path) -> None:
    """scancel the tutorial's jobs that are still queued (after a failure), found by their working directory."""
    proc = subprocess.run(["squeue", "-h", "-o", "%F %Z"], capture_output=True, text=True, check=False)
    jobs = {
        job
        for job, _, where in (line.partition(" ") for line in proc.stdout.splitlines())
        if where == str(workdir) or where.startswith(f"{workdir}/")
    }
    if jobs:
        subprocess.run(["scancel", *sorted(jobs)], check=False)


def describe(block: Block, output: str) -> str:
    return f"tutorial block at docs/tutorial.md:{block.line}:\n{block.text}\n--- its output ---\n{output or '(none)'}"


# --- fast checks of the markup --------------------------------------------------------------------


def test_tutorial_markup_is_well_formed() -> None:
    blocks = parse_tutorial(TUTORIAL.read_text(encoding="utf-8"))
    shell = [b for b in blocks if b.kind == "bash"]
    assert len(shell) >= 15, "the tutorial lost its runnable blocks"
    assert sum(len(b.expected) for b in shell) >= 60, "the tutorial lost its expected outputs"
    for block in shell:
        check = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
        assert check.returncode == 0, f"docs/tutorial.md:{block.line}: {check.stderr}"
    script = session_script(blocks)
    assert subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True).returncode == 0


def test_expected_output_matching() -> None:
    output = "a: 1 done\nnoise\nshard 0/4: kept 3 of 12 (x)\nend\n"
    assert missing_line(["a: ... done", "shard 0/4: kept ... of 12 ...", "end"], output) is None
    assert missing_line(["end", "a: 1 done"], output) == "a: 1 done", "order matters"
    assert missing_line(["kept 3 of 13"], output) == "kept 3 of 13"
    assert pattern("(x) [y]").search("(x) [y]") and not pattern("a.b").search("axb")


# --- the tutorial, for real -----------------------------------------------------------------------


@pytest.mark.slurm
def test_tutorial_runs_top_to_bottom(slurm_cluster: str, tmp_path: Path) -> None:
    blocks = parse_tutorial(TUTORIAL.read_text(encoding="utf-8"))
    bindir = os.path.dirname(sys.executable)
    assert os.access(os.path.join(bindir, "curator-slurm"), os.X_OK), f"no curator-slurm next to {sys.executable}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CURATOR_", "RAY_"))}
    env.update(REPO=str(REPO), PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1")
    workdir = tmp_path / "tutorial"
    workdir.mkdir()
    (tmp_path / "session.sh").write_text(session_script(blocks), encoding="utf-8")

    proc = subprocess.Popen(
        ["bash", str(tmp_path / "session.sh")],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    timed_out = False
    output = ""
    try:
        output, _ = proc.communicate(timeout=TUTORIAL_TIMEOUT)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)  # the session and everything it started
        output, _ = proc.communicate()
    finally:
        cancel_jobs_started_in(workdir)
    pieces, finished = split_output(output)

    if timed_out or proc.returncode != 0 or not finished:
        last = max(pieces, default=None)
        where = describe(blocks[last], pieces[last]) if last is not None else output
        reason = f"timed out after {TUTORIAL_TIMEOUT} s" if timed_out else f"bash exited {proc.returncode}"
        pytest.fail(f"the tutorial failed ({reason}) in {where}")
    for n, block in enumerate(blocks):
        if block.kind != "bash" or not block.expected:
            continue
        missing = missing_line(block.expected, pieces.get(n, ""))
        if missing is not None:
            pytest.fail(f"expected output line {missing!r} not found (in order) for {describe(block, pieces[n])}")


# --- the reference names everything ---------------------------------------------------------------


def variables_read_by_the_code() -> set[str]:
    """Every CURATOR_*, SLURM_* and RAY_ADDRESS named in a string literal under src/ (names ending in
    ``_`` are prefixes, e.g. ``SLURM_ARRAY_`` in a ``startswith``)."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(ENV_NAME.findall(node.value))
    return names


def test_every_environment_variable_is_in_the_reference() -> None:
    names = variables_read_by_the_code()
    assert {"CURATOR_NUM_SHARDS", "SLURM_ARRAY_TASK_ID", "CURATOR_GRACE_SECONDS"} <= names, "the scan is broken"
    reference = REFERENCE.read_text(encoding="utf-8")
    missing = sorted(
        name
        for name in names
        if not re.search(re.escape(name) + ("" if name.endswith("_") else r"(?![A-Z_])"), reference)
    )
    assert not missing, f"docs/reference.md does not mention {missing}"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def long_options(help_text: str) -> set[str]:
    """The long options of a --help text, without its examples (which show the script's own options)."""
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", help_text.split("\nexamples:")[0]))


def reference_section(reference: str, command: str) -> str:
    """The part of the reference under the heading of ``curator-slurm COMMAND``."""
    match = re.search(rf"^(#+) `curator-slurm {command}`.*$", reference, re.MULTILINE)
    assert match, f"docs/reference.md has no heading for `curator-slurm {command}`"
    level = len(match.group(1))
    end = re.search(rf"^#{{1,{level}}} ", reference[match.end() :], re.MULTILINE)
    return reference[match.end() : match.end() + end.start()] if end else reference[match.end() :]


def test_every_command_and_option_is_in_the_reference() -> None:
    reference = REFERENCE.read_text(encoding="utf-8")
    commands = _subcommands()
    assert {"submit", "status", "failures", "retry", "plan", "local", "shard"} <= set(commands)
    top = long_options(build_parser().format_help()) - {"--help"}
    missing = [f"curator-slurm {o}" for o in sorted(top) if o not in reference]
    for name, parser in commands.items():
        section = reference_section(reference, name)
        for option in sorted(long_options(parser.format_help()) - {"--help"}):
            if not re.search(re.escape(option) + r"(?![\w-])", section):
                missing.append(f"curator-slurm {name} {option}")
    assert not missing, f"docs/reference.md does not document {missing}"

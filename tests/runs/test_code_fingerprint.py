"""A stage's code is part of its run's fingerprint: editing the logic of a user-defined filter (not its
parameters) and running the same script into the same output is refused, naming the class that changed,
instead of keeping the old outputs as done; the package's own code counts through its version."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from curator_slurm import Pipeline
from curator_slurm.stages import JsonlReader, JsonlWriter, ScoreFilter
from curator_slurm.stages.code import code_digests
from curator_slurm.stages.filters.base import DocumentFilter
from support.helpers import clean_env

SCRIPT = """
import sys
from curator_slurm import Pipeline
from curator_slurm.stages import JsonlReader, JsonlWriter, ScoreFilter
from curator_slurm.stages.filters.base import DocumentFilter


class ShortFilter(DocumentFilter):
    def score_document(self, text):
        return len(text)

    def keep_document(self, score):
        return score {op} 300


if __name__ == "__main__":
    (
        Pipeline("custom")
        .add_stage(JsonlReader(sys.argv[1]))
        .add_stage(ScoreFilter(ShortFilter(), text_field="text"))
        .add_stage(JsonlWriter(sys.argv[2]))
        .run()
    )
"""


def run(script: Path, corpus: Path, out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(script), str(corpus), str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=300)


def test_an_edited_custom_filter_is_refused_naming_its_class(corpus: Path, tmp_path: Path) -> None:
    script, out = tmp_path / "custom.py", tmp_path / "out"
    script.write_text(textwrap.dedent(SCRIPT.format(op=">")))
    assert run(script, corpus, out).returncode == 0
    assert "already done" in run(script, corpus, out).stderr, "unchanged code resumes"

    script.write_text(textwrap.dedent(SCRIPT.format(op="<")))  # the logic, not a parameter
    edited = run(script, corpus, out)
    assert edited.returncode != 0
    assert "belongs to another pipeline" in edited.stderr, edited.stderr[-2000:]
    assert "the code of ShortFilter changed" in edited.stderr


def test_code_digests_see_nested_user_code_and_lambdas_but_not_installed_or_own_code() -> None:
    class Mine(DocumentFilter):
        def score_document(self, text: str) -> float:
            return 1.0

        def keep_document(self, score: float) -> bool:
            return True

    own = Pipeline("p").add_stage(JsonlReader("x")).add_stage(JsonlWriter("y")).build()
    assert all(code_digests(s) == {} for s in own), "the package's own stages count through its version"
    nested = code_digests(ScoreFilter(Mine(), text_field="text"))
    assert [k for k in nested if k.endswith("Mine")], nested
    one, two = (lambda t: len(t) > 3), (lambda t: len(t) > 4)
    assert code_digests(ScoreFilter(Mine(), text_field="text")) == nested
    holder_one, holder_two = type("H", (), {})(), type("H", (), {})()
    holder_one.f, holder_two.f = one, two
    assert code_digests(holder_one) != code_digests(holder_two), "two lambdas on one line differ by their constants"

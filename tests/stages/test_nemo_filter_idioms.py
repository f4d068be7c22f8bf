"""NeMo Curator's filter idioms work as in NeMo (issue 24 items 4 and 9).

NeMo's documented contract (``DocumentFilter``): ``score_document(text)`` returns a score of any type and
``keep_document(score)`` returns True to keep the document; ``ScoreFilter`` keeps exactly those, and with
``score_field`` the scores go into that column as they are (a bool score gives a bool column). Its
Llama-Nemotron tutorial writes all its heuristic filters as ``score_document -> bool`` and
``keep_document(score): return score``. A filter returning something that cannot be a decision fails its
task once (retrying cannot help) naming the filter class and the value. A custom filter is named after
its class unless it sets a name, so the funnel of ``status`` tells filters apart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from curator_slurm import LocalExecutor, Pipeline, PipelineFailedError
from curator_slurm.runs.ledger import load_status
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from curator_slurm.stages import DocumentFilter, JsonlReader, ParquetWriter, ScoreFilter
from support.helpers import clean_env

DOCS = [
    "<think>\nreasoning on\n</think> answer",
    "<think>\n\n</think> empty thoughts, detailed thinking on",
    "no tags at all, thinking off",
    "<think> never closed, nano",
    "plain text for nano training",
    "</think> only a closing tag",
]


# Written in the Llama-Nemotron tutorial's idiom (bool score, `return score`), each with its own test.
class HasThinkingOn(DocumentFilter):
    def __init__(self) -> None:
        super().__init__()

    def score_document(self, text: str) -> bool:
        return "on" in text.lower()

    def keep_document(self, score: bool) -> bool:
        return score


class ClosesItsThinkTag(DocumentFilter):
    def score_document(self, text: str) -> bool:
        return not ("<think>" in text and "</think>" not in text)

    def keep_document(self, score: bool) -> bool:
        return score


class ThoughtsNotEmpty(DocumentFilter):
    def score_document(self, text: str) -> bool:
        return "<think>\n\n</think>" not in text and "<think></think>" not in text

    def keep_document(self, score: bool) -> bool:
        return score


class NumpyBool(DocumentFilter):
    def score_document(self, text: str) -> Any:
        return np.bool_("nano" in text)

    def keep_document(self, score: Any) -> Any:
        return np.bool_(score)


class CountKeeps(DocumentFilter):
    """An int score and ``return score``: a count, kept when it is not zero."""

    def score_document(self, text: str) -> int:
        return text.count("think")

    def keep_document(self, score: int) -> int:
        return score


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in DOCS))
    return corpus


def _run(tmp_path: Path, *filters: DocumentFilter, score: bool = True) -> Path:
    out = tmp_path / "out"
    pipeline = Pipeline("nemo_idioms").add_stage(JsonlReader(str(_corpus(tmp_path))))
    for i, f in enumerate(filters):
        pipeline.add_stage(ScoreFilter(f, score_field=f"score_{i}" if score else None))
    pipeline.add_stage(ParquetWriter(out)).run(LocalExecutor(workers=1))
    return out


def _kept(out: Path) -> Any:
    (path,) = out.glob("*.parquet")
    return pq.read_table(path)


@pytest.mark.parametrize(
    ("filter_obj", "expected"),
    [
        (HasThinkingOn(), [t for t in DOCS if "on" in t.lower()]),
        (ClosesItsThinkTag(), [t for t in DOCS if not ("<think>" in t and "</think>" not in t)]),
        (ThoughtsNotEmpty(), [t for t in DOCS if "<think>\n\n</think>" not in t]),
        (NumpyBool(), [t for t in DOCS if "nano" in t]),
        (CountKeeps(), [t for t in DOCS if "think" in t]),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, DocumentFilter) else "",
)
def test_nemo_idioms_keep_what_keep_document_accepts(
    tmp_path: Path, filter_obj: DocumentFilter, expected: list
) -> None:
    table = _kept(_run(tmp_path, filter_obj))
    assert table.column("text").to_pylist() == expected
    scores = table.column("score_0").to_pylist()
    assert scores == [filter_obj.score_document(t) for t in expected]


def test_a_bool_score_column_stays_bool_as_in_nemo(tmp_path: Path) -> None:
    table = _kept(_run(tmp_path, HasThinkingOn(), CountKeeps()))
    assert str(table.schema.field("score_0").type) == "bool"
    assert str(table.schema.field("score_1").type) == "int64"
    assert table.column("text").to_pylist() == [t for t in DOCS if "on" in t.lower() and "think" in t]


class ReturnsTheScore(DocumentFilter):
    """keep_document returns a float score, not a decision."""

    def score_document(self, text: str) -> float:
        return float(len(text))

    def keep_document(self, score: float) -> float:
        return score


class ReturnsNone(DocumentFilter):
    def score_document(self, text: str) -> bool:
        return True

    def keep_document(self, score: bool) -> None:
        return None


class MixedScores(DocumentFilter):
    def score_document(self, text: str) -> Any:
        return True if "think" in text else 0.5

    def keep_document(self, score: Any) -> bool:
        return True


@pytest.mark.parametrize(
    ("filter_obj", "stage", "message"),
    [
        (
            ReturnsTheScore(),
            "score_filter[returns_the_score]",
            f"ReturnsTheScore.keep_document returned {float(len(DOCS[0]))} (float) for the score "
            f"{float(len(DOCS[0]))}; it must return a bool",
        ),
        (
            ReturnsNone(),
            "score_filter[returns_none]",
            "ReturnsNone.keep_document returned None (NoneType) for the score True; it must return a bool",
        ),
        (
            MixedScores(),
            "score_filter[mixed_scores]",
            "MixedScores.score_document returned values that do not fit one column (types ['bool', 'float']",
        ),
    ],
    ids=["float", "none", "mixed"],
)
def test_an_unusable_return_fails_once_naming_the_filter(
    tmp_path: Path, filter_obj: DocumentFilter, stage: str, message: str
) -> None:
    with pytest.raises(PipelineFailedError):
        _run(tmp_path, filter_obj)
    (record,) = load_status(str(tmp_path / "out" / DEFAULT_RUN_DIR_NAME)).failed.values()
    assert record["attempts"] == 1, "retrying cannot change what the filter returns"
    assert record["stage"] == stage
    assert record["error"].startswith(f"FilterError: {message}")


class Named(DocumentFilter):
    name = "my_rule"

    def score_document(self, text: str) -> bool:
        return True

    def keep_document(self, score: bool) -> bool:
        return score


class NamedTheNemoWay(DocumentFilter):
    def __init__(self) -> None:
        self._name = "nemo_named"

    def score_document(self, text: str) -> bool:
        return True

    def keep_document(self, score: bool) -> bool:
        return score


def test_the_funnel_names_each_custom_filter_by_its_class_unless_it_sets_a_name(tmp_path: Path) -> None:
    out = _run(tmp_path, HasThinkingOn(), ClosesItsThinkTag(), Named(), NamedTheNemoWay(), score=False)
    status = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(out / DEFAULT_RUN_DIR_NAME), "--json"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    funnel = {row["stage"]: (row["rows_in"], row["rows_out"]) for row in json.loads(status.stdout)["funnel"]}
    on = sum("on" in t.lower() for t in DOCS)
    closed = sum("on" in t.lower() and not ("<think>" in t and "</think>" not in t) for t in DOCS)
    assert funnel["score_filter[has_thinking_on]"] == (len(DOCS), on)
    assert funnel["score_filter[closes_its_think_tag]"] == (on, closed)
    assert funnel["score_filter[my_rule]"] == (closed, closed)
    assert funnel["score_filter[nemo_named]"] == (closed, closed)

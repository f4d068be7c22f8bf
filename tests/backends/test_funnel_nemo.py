"""A NeMo-spelled pipeline in the funnel of `curator-slurm status` and in the logs: a custom DocumentModifier is named
by its class (snake case), not ``document_modifier``; a ScoreFilter on the URL counts the characters of the
documents' text it removed, not the URLs' length; a lambda Filter keeps what it returns True for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.nemo import (
    DocumentModifier,
    Filter,
    JsonlReader,
    JsonlWriter,
    Modify,
    PornographicUrlsFilter,
    ScoreFilter,
)
from curator_slurm.runs.rundir import DEFAULT_RUN_DIR_NAME
from support.docfiles import output_rows, write_jsonl
from support.helpers import clean_env


class SpaceCollapser(DocumentModifier):
    def modify_document(self, text: str) -> str:
        return " ".join(text.split())


class TagStripper(DocumentModifier):
    def __init__(self) -> None:
        super().__init__()

    def modify_document(self, text: str) -> str:
        return text.replace("<b>", "")


DOCS = [
    {"url": "https://example.org/porn/" + "a" * 200, "text": "short", "lang": "en"},
    {"url": "https://example.org/fine", "text": "kept  <b>text", "lang": "en"},
    {"url": "https://porn.example/" + "b" * 300, "text": "x" * 40, "lang": "en"},
    {"url": "https://example.org/other", "text": "dropped by language", "lang": "de"},
]


def test_status_names_custom_modifiers_and_counts_text_characters(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "in" / "a.jsonl", DOCS)
    out = tmp_path / "out"
    pipeline = (
        Pipeline("nemo-funnel")
        .add_stage(JsonlReader(file_paths=str(tmp_path / "in")))
        .add_stage(ScoreFilter(filter_obj=PornographicUrlsFilter(), text_field="url"))
        .add_stage(Modify(modifier_fn=[SpaceCollapser(), TagStripper()], input_fields="text"))
        .add_stage(Filter(filter_fn=lambda lang: lang == "en", filter_field="lang"))
        .add_stage(JsonlWriter(path=str(out)))
    )
    result = pipeline.run(LocalExecutor(workers=1), ShardSpec.single())
    assert [r["text"] for r in output_rows(out)] == ["kept text"]
    status = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(out / DEFAULT_RUN_DIR_NAME), "--json"],
        capture_output=True, text=True, env=clean_env(), check=True,
    )  # fmt: skip
    funnel = {row["stage"]: row for row in json.loads(status.stdout)["funnel"]}
    assert list(funnel) == [row.stage for row in result.funnel()]
    assert "modify[space_collapser+tag_stripper]" in funnel
    assert not any("document_modifier" in stage for stage in funnel)
    urls = funnel[f"score_filter[{PornographicUrlsFilter().name}]"]
    assert urls["dropped"] == 2
    assert urls["chars_removed"] == len("short") + 40, "the text's characters, not the URLs'"
    language = funnel["filter[<lambda>]"]
    assert language["dropped"] == 1 and language["chars_removed"] == len("dropped by language")
    text = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(out / DEFAULT_RUN_DIR_NAME)],
        capture_output=True, text=True, env=clean_env(), check=True,
    ).stdout  # fmt: skip
    assert any(line.strip().startswith("modify[space_collapser+tag_stripper]") for line in text.splitlines())

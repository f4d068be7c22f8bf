"""LanguageFilter: CLD2 (pycld2, model built in, offline) names the language of clear text, keeps the
languages asked for above the score, writes the columns, survives text CLD2 refuses, and is imported
only when used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import DocumentBatch, InputError, LocalExecutor, Pipeline, ShardSpec
from curator_slurm.stages import JsonlReader, LanguageFilter, ParquetWriter
from curator_slurm.stages.filters.language import detect_language, detect_languages

ENGLISH = "The committee published its annual report on water quality in the river basin last week."
GERMAN = "Der Ausschuss hat letzte Woche seinen Jahresbericht über die Wasserqualität im Flussgebiet veröffentlicht."
FRENCH = "Le comité a publié la semaine dernière son rapport annuel sur la qualité de l'eau du bassin."
SPANISH = "El comité publicó la semana pasada su informe anual sobre la calidad del agua en la cuenca del río."
CHINESE = "委员会上周发布了关于流域水质的年度报告\uff0c报告指出水质总体良好。"


def test_clear_text_gets_its_language_and_a_high_score() -> None:
    for text, code in [(ENGLISH, "en"), (GERMAN, "de"), (FRENCH, "fr"), (SPANISH, "es"), (CHINESE, "zh")]:
        got, score = detect_language(text)
        assert got == code, text
        assert 0.9 <= score <= 1.0, (text, score)


def test_text_without_language_is_unknown_with_score_zero() -> None:
    codes, scores = detect_languages(pa.chunked_array([["", "   ", "12345 678 90", "!!! ???", None]], pa.string()))
    assert codes.to_pylist() == ["un"] * 5
    assert scores.to_pylist() == [0.0] * 5


def test_code_points_cld2_refuses_do_not_fail_the_batch() -> None:
    # CLD2 raises on C0/C1 controls and Unicode non-characters; they become spaces before detection.
    dirty = "\x00\x0b\x7f\x85\x9f\ufdd0\ufffe" + chr(0x10FFFF) + " " + ENGLISH.replace(" ", "\x01 ", 3)
    codes, scores = detect_languages(pa.array([dirty, ENGLISH]))
    assert codes.to_pylist() == ["en", "en"]
    assert scores[0].as_py() >= 0.9


def _batch(texts: list[str | None]) -> DocumentBatch:
    table = pa.table({"text": pa.array(texts, pa.string()), "n": list(range(len(texts)))})
    return DocumentBatch(task_id="t", data=table, metadata={"files": ["in.jsonl"]})


def test_language_filter_keeps_the_languages_asked_for_and_writes_the_columns() -> None:
    batch = _batch([ENGLISH, GERMAN, "", FRENCH, None])
    out = LanguageFilter(languages=["EN", "fr"]).process(batch).data
    assert out.column("n").to_pylist() == [0, 3]
    assert out.column("language").to_pylist() == ["en", "fr"]
    assert all(s >= 0.9 for s in out.column("language_score").to_pylist())

    # None keeps everything and only scores; the column names are configurable or can be left out.
    scored = LanguageFilter(languages=None, min_score=0.0, language_field="lang", score_field=None)
    out = scored.process(batch).data
    assert out.column_names == ["text", "n", "lang"]
    assert out.column("lang").to_pylist() == ["en", "de", "un", "fr", "un"]

    # invert keeps what fails; min_score=1.0 keeps nothing CLD2 is not fully sure of.
    out = LanguageFilter("en", invert=True).process(batch).data
    assert out.column("n").to_pylist() == [1, 2, 3, 4]
    assert LanguageFilter("de", min_score=1.0).process(_batch([ENGLISH])).data.num_rows == 0


def test_language_filter_arguments_and_errors() -> None:
    with pytest.raises(ValueError, match=r"min_score=1\.5"):
        LanguageFilter(min_score=1.5)
    with pytest.raises(ValueError, match=r"languages=\[\]"):
        LanguageFilter(languages=[])
    with pytest.raises(InputError, match=r"in\.jsonl: no field 'body'.*text_field="):
        LanguageFilter(text_field="body").process(_batch([ENGLISH]))
    assert LanguageFilter(["fr", "EN"]).params()["languages"] == ["en", "fr"]


def test_language_filter_in_a_pipeline(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    docs = [ENGLISH, GERMAN, SPANISH, ENGLISH.upper(), "", CHINESE]
    (src / "a.jsonl").write_text("".join(json.dumps({"text": t, "i": i}) + "\n" for i, t in enumerate(docs)))
    pipeline = (
        Pipeline("lang")
        .add_stage(JsonlReader(str(src)))
        .add_stage(LanguageFilter(["en", "es"]))
        .add_stage(ParquetWriter(str(tmp_path / "out")))
    )
    result = pipeline.run(LocalExecutor(workers=1), shard=ShardSpec.single())
    table = pa.concat_tables([pq.read_table(f) for f in result.output_files])
    assert table.column("i").to_pylist() == [0, 2, 3]
    assert table.column("language").to_pylist() == ["en", "es", "en"]


def test_importing_the_stages_does_not_import_pycld2() -> None:
    code = "import sys, curator_slurm.stages; print('pycld2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

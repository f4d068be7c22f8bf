"""fastText stages (issue 27, item 2): LanguageFilter(backend="fasttext") with datatrove's ft176 decision,
FastTextClassifierFilter with datatrove's, FastTextQualityFilter with NeMo Curator's. Models are trained here
with fastText's own trainer on text this file writes (milliseconds); every decision and score column is
checked against calling the model directly with the preprocessing the peer applies."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import DocumentBatch, InputError, LocalExecutor, Pipeline, ShardSpec
from curator_slurm.stages import (
    FastTextClassifierFilter,
    FastTextQualityFilter,
    JsonlReader,
    LanguageFilter,
    ParquetWriter,
    ScoreFilter,
)

fasttext = pytest.importorskip("fasttext")


def _words(line: str) -> list[str]:
    return line.split()


VOCAB = {
    "en": _words("the river water report committee week quality basin annual published people city house"),
    "de": _words("der fluss wasser bericht ausschuss woche qualität jahr menschen stadt haus und nicht"),
    "fr": _words("le fleuve eau rapport comité semaine qualité année gens ville maison et pas"),
}
HQ = _words("science research results study analysis theory evidence method data experiment measured")
LQ = _words("buy cheap click free now win casino deal offer discount sale hot")


#: Trains one model in a fresh interpreter: fastText 0.9.2 reads memory it did not initialise, so a second
#: training in one process can give another model (or "Encountered NaN"), while the first one in a fresh
#: process is the same every time (one thread, fixed seed). A NaN is retried in a new process.
_TRAIN = """
import sys, fasttext
model = fasttext.train_supervised(
    sys.argv[1], epoch=20, lr=0.2, dim=16, minn=2, maxn=4, bucket=10_000, thread=1, seed=1, verbose=0
)
model.save_model(sys.argv[2])
"""


def _train(path: Path, lines: list[str]) -> str:
    data = path.with_suffix(".txt")
    data.write_text("\n".join(lines) + "\n")
    for attempt in range(10):
        done = subprocess.run([sys.executable, "-c", _TRAIN, str(data), str(path)], capture_output=True, text=True)
        if done.returncode == 0:
            return str(path)
        if "NaN" not in done.stderr or attempt == 9:
            raise RuntimeError(f"training a test model failed: {done.stderr[-2000:]}")
    raise AssertionError("unreachable")


def _sentence(rng: random.Random, words: list[str], n: int = 10) -> str:
    return " ".join(rng.choice(words) for _ in range(n))


@pytest.fixture(scope="module")
def lid_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    rng = random.Random(0)
    lines = [f"__label__{lang} {_sentence(rng, words)}" for _ in range(150) for lang, words in VOCAB.items()]
    return _train(tmp_path_factory.mktemp("lid") / "lid.bin", lines)


@pytest.fixture(scope="module")
def quality_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    rng = random.Random(1)
    lines = [f"__label__hq {_sentence(rng, HQ)}" for _ in range(150)]
    lines += [f"__label__lq {_sentence(rng, LQ)}" for _ in range(150)]
    return _train(tmp_path_factory.mktemp("quality") / "quality.bin", lines)


def _mixed_texts(seed: int, n: int) -> list[str]:
    """Documents mixing the languages (or the two qualities) in random proportions, some over several
    lines, so that the scores spread over (0, 1)."""
    rng = random.Random(seed)
    pools = [*VOCAB.values(), HQ, LQ]
    texts = []
    for _ in range(n):
        parts = [_sentence(rng, rng.choice(pools), rng.randint(2, 8)) for _ in range(rng.randint(1, 4))]
        texts.append(rng.choice(["\n", " ", "\n\n"]).join(parts))
    return [*texts, "", "   ", "\n"]


def _batch(texts: list[str | None]) -> DocumentBatch:
    table = pa.table({"text": pa.array(texts, pa.string()), "n": list(range(len(texts)))})
    return DocumentBatch(task_id="t", data=table, metadata={"files": ["in.jsonl"]})


def _datatrove_language(model, text: str, languages: list[str] | None, threshold: float) -> tuple[str, float, bool]:
    """datatrove's FT176LID.predict and LanguageFilter.filter, written out from their documented rule."""
    labels, probs = model.predict(text.replace("\n", " "), k=-1)
    pairs = {label.split("__")[2]: float(p) for label, p in zip(labels, probs, strict=True)}
    best = max(pairs.items(), key=lambda kv: kv[1])
    keep = any(pairs.get(lang, 0.0) > threshold for lang in languages) if languages else best[1] > threshold
    return best[0], best[1], keep


def test_fasttext_language_filter_keeps_what_datatrove_keeps_with_its_columns(lid_model: str) -> None:
    model = fasttext.load_model(lid_model)
    texts = _mixed_texts(2, 300)
    expected = [_datatrove_language(model, t, ["de", "fr"], 0.4) for t in texts]
    # the threshold is strict: a document whose score equals it is dropped (a boundary taken from the data)
    boundary = next(score for _, score, keep in expected if 0.45 < score < 0.9 and keep)
    expected = [_datatrove_language(model, t, ["de", "fr"], boundary) for t in texts]
    stage = LanguageFilter(languages=["DE", "fr"], backend="ft176", model_path=lid_model, language_threshold=boundary)
    out = stage.process(_batch(texts)).data
    kept = [i for i, (_, _, keep) in enumerate(expected) if keep]
    assert out.column("n").to_pylist() == kept
    assert 20 < len(kept) < len(texts) - 20
    assert out.column("language").to_pylist() == [expected[i][0] for i in kept]
    assert out.column("language_score").to_pylist() == [expected[i][1] for i in kept]
    at_boundary = [i for i, (_, score, _) in enumerate(expected) if score == boundary]
    assert at_boundary and not set(at_boundary) & set(kept)
    # a low threshold keeps documents whose best language is another one, as datatrove does
    low = LanguageFilter(languages="fr", backend="fasttext", model_path=lid_model, language_threshold=0.2)
    low_out = low.process(_batch(texts)).data
    want = [i for i, t in enumerate(texts) if _datatrove_language(model, t, ["fr"], 0.2)[2]]
    assert low_out.column("n").to_pylist() == want
    assert {"en", "de"} & set(low_out.column("language").to_pylist())


def test_fasttext_language_filter_without_languages_label_only_and_invert(lid_model: str) -> None:
    model = fasttext.load_model(lid_model)
    texts = _mixed_texts(3, 200)
    expected = [_datatrove_language(model, t, None, 0.65) for t in texts]
    out = LanguageFilter(languages=None, backend="fasttext", model_path=lid_model).process(_batch(texts)).data
    kept = [i for i, (_, _, keep) in enumerate(expected) if keep]
    assert out.column("n").to_pylist() == kept and 0 < len(kept) < len(texts)
    inverted = LanguageFilter(languages=None, backend="fasttext", model_path=lid_model, invert=True)
    assert inverted.process(_batch(texts)).data.column("n").to_pylist() == sorted(set(range(len(texts))) - set(kept))
    labelled = LanguageFilter(languages="en", backend="fasttext", model_path=lid_model, label_only=True)
    every = labelled.process(_batch(texts)).data
    assert every.num_rows == len(texts)
    assert every.column("language").to_pylist() == [lang for lang, _, _ in expected]


def test_fasttext_language_filter_refuses_what_it_cannot_run(lid_model: str, tmp_path: Path) -> None:
    missing = tmp_path / "lid.176.bin"
    with pytest.raises(InputError, match=r"lid\.176\.bin.*no such file.*never downloaded"):
        LanguageFilter(backend="fasttext", model_path=missing)
    with pytest.raises(ValueError, match="needs model_path"):
        LanguageFilter(backend="fasttext")
    with pytest.raises(ValueError, match="min_score and best_effort are CLD2's"):
        LanguageFilter(backend="fasttext", model_path=lid_model, min_score=0.5)
    with pytest.raises(ValueError, match="model_path and language_threshold are for backend='fasttext'"):
        LanguageFilter(model_path=lid_model)
    with pytest.raises(ValueError, match=r"not labels of .*lid\.bin.*'de', 'en', 'fr'"):
        LanguageFilter(languages=["en", "xx"], backend="fasttext", model_path=lid_model).setup()
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a model")
    with pytest.raises(InputError, match=r"junk\.bin.*not a fastText model"):
        LanguageFilter(backend="fasttext", model_path=junk).setup()


def test_a_model_with_nan_weights_fails_naming_the_file(quality_model: str, tmp_path: Path) -> None:
    broken = tmp_path / "diverged.bin"
    data = bytearray(Path(quality_model).read_bytes())
    data[-2 * 16 * 4 :] = np.full(2 * 16, np.nan, np.float32).tobytes()  # the output matrix (2 labels x dim 16)
    broken.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"diverged\.bin holds NaN or infinite weights.*retrain"):
        FastTextClassifierFilter(broken, keep_labels=("hq", 0.5)).process(_batch(["science research results"]))


def test_the_fingerprint_names_the_model_file_and_not_the_loaded_model(lid_model: str, quality_model: str) -> None:
    stages = [
        LanguageFilter(backend="fasttext", model_path=lid_model, languages="en"),
        FastTextClassifierFilter(quality_model, keep_labels=("hq", 0.5)),
        FastTextQualityFilter(quality_model),
    ]
    for stage in stages:
        before = stage.params()
        stage.setup()  # a loaded model is not a setting: the fingerprint is the same after setup
        assert stage.params() == before and "_model" not in before
        assert before["model_path"] in (lid_model, quality_model)
    cld2, fast = LanguageFilter(languages="en").params(), stages[0].params()
    assert (cld2["backend"], cld2["min_score"], fast["backend"], fast["language_threshold"]) == (
        "cld2",
        0.3,
        "fasttext",
        0.65,
    )


def _datatrove_classifier_scores(model, unit: str, replacement: str) -> dict[str, float]:
    labels, probs = model.predict(unit.strip().replace("\n", replacement), k=-1)
    return {label: float(p) for label, p in zip(labels, probs, strict=True)}


def test_classifier_filter_keep_and_remove_labels_decide_as_datatrove(quality_model: str) -> None:
    model = fasttext.load_model(quality_model)
    texts = [t for t in _mixed_texts(4, 300) if t.strip()] + ["  "]
    scores = [_datatrove_classifier_scores(model, t, "") for t in texts]
    boundary = sorted(s["__label__hq"] for s in scores)[len(scores) // 2]  # a document exactly at the minimum
    stage = FastTextClassifierFilter(quality_model, keep_labels=("hq", boundary))
    out = stage.process(_batch(texts)).data
    kept = [i for i, s in enumerate(scores) if s["__label__hq"] >= boundary and texts[i].strip()]
    assert out.column("n").to_pylist() == kept
    assert any(scores[i]["__label__hq"] == boundary for i in kept)
    assert out.column("__label__hq").to_pylist() == [scores[i]["__label__hq"] for i in kept]
    assert out.column("__label__lq").to_pylist() == [scores[i]["__label__lq"] for i in kept]
    assert out.column("text").to_pylist() == [texts[i] for i in kept]

    removing = FastTextClassifierFilter(quality_model, remove_labels=[("lq", 0.7)], newline_replacement=" ")
    spaced = [_datatrove_classifier_scores(model, t, " ") for t in texts]
    want = [i for i, s in enumerate(spaced) if not s["__label__lq"] >= 0.7 and texts[i].strip()]
    got = removing.process(_batch(texts)).data
    assert got.column("n").to_pylist() == want and 0 < len(want) < len(texts)
    assert got.column("__label__lq").to_pylist() == [spaced[i]["__label__lq"] for i in want]
    # the replacement matters: "a\nb" is one word with datatrove's default "", two with " "
    joined = [i for i, t in enumerate(texts) if "\n" in t.strip() and spaced[i] != scores[i]]
    assert joined

    scorer = FastTextClassifierFilter(quality_model).process(_batch(texts)).data
    assert scorer.num_rows == len(texts) - 1  # no rule keeps every document but the blank one


def test_classifier_filter_paragraph_mode_keeps_the_paragraphs_that_pass(quality_model: str) -> None:
    model = fasttext.load_model(quality_model)
    good = "science research results study analysis theory evidence"
    bad = "buy cheap click free now win casino deal offer"
    text = f"{good}\n\n{bad}\nmethod data experiment measured science\n\n\n{bad} sale\n"
    units = [f"{good}\n\n", f"{bad}\n", "method data experiment measured science\n\n\n", f"{bad} sale"]
    assert "".join(units) == text.rstrip("\n")
    direct = [_datatrove_classifier_scores(model, u, "") for u in units]
    assert [s["__label__hq"] >= 0.5 for s in direct] == [True, False, True, False]
    stage = FastTextClassifierFilter(quality_model, keep_labels=("hq", 0.5), filter_mode="PARAGRAPH")
    out = stage.process(_batch([text, bad, ""])).data
    assert out.column("n").to_pylist() == [0]
    assert out.column("text").to_pylist() == [units[0] + units[2]]
    assert out.column("__label__hq").to_pylist() == [pytest.approx(np.mean([s["__label__hq"] for s in direct]))]
    empty = stage.process(_batch([])).data
    assert empty.num_rows == 0 and "__label__hq" in empty.column_names
    with pytest.raises(ValueError, match="filter_mode='SENTENCE'"):
        FastTextClassifierFilter(quality_model, filter_mode="SENTENCE")
    with pytest.raises(ValueError, match="not both"):
        FastTextClassifierFilter(quality_model, keep_labels=("hq", 0.5), remove_labels=("lq", 0.5))
    with pytest.raises(ValueError, match=r"label 'spam'.*labels are \['hq', 'lq'\]|labels are \['lq', 'hq'\]"):
        FastTextClassifierFilter(quality_model, keep_labels=("spam", 0.5)).setup()


def test_fasttext_filters_write_what_they_removed(quality_model: str, lid_model: str, tmp_path: Path) -> None:
    """Each fastText filter hands its removed documents to its exclusion writer: the text as it came in (before
    paragraph mode rewrote it), with the columns it wrote; the funnel counts the rewriting."""
    from curator_slurm.stages import JsonlWriter
    from curator_slurm.stages.filters.decide import REASON_FIELD

    good = "science research results study analysis theory evidence"
    bad = "buy cheap click free now win casino deal offer"
    texts = [f"{good}\n\n{bad}", bad, ""]
    stages = {
        "classifier": FastTextClassifierFilter(quality_model, keep_labels=("hq", 0.5), filter_mode="PARAGRAPH"),
        "quality": FastTextQualityFilter(quality_model, alpha=0.05),
        "language": LanguageFilter("en", backend="fasttext", model_path=lid_model),
    }
    for name, stage in stages.items():
        stage = stage.with_(exclusion_writer=JsonlWriter(tmp_path / name))
        task = _batch(texts)
        out = stage.process(task)
        stage.end_source(task, failed=False)  # the exclusion file is published as the source task ends
        rows = [json.loads(line) for p in (tmp_path / name).glob("*.jsonl") for line in p.read_text().splitlines()]
        assert sorted(out.data.column("n").to_pylist() + [r["n"] for r in rows]) == [0, 1, 2], name
        assert all(r["text"] == texts[r["n"]] and r[REASON_FIELD] == stage.name for r in rows), name
        if name == "classifier":
            assert out.metadata["removed_chars"]["rewritten"] == len(texts[0]) - len(good) - 2
            assert {r["n"] for r in rows} == {1, 2} and "__label__hq" in rows[0]


def _nemo_score(model, text: str, label: str = "__label__hq") -> float:
    """NeMo Curator's FastTextQualityFilter.score_document, written out from its rule."""
    labels, probs = model.predict([text.replace("\n", " ").replace("__label__", " ")])
    score = float(probs[0][0])
    return score if labels[0][0] == label else 1 - score


def test_quality_filter_scores_as_nemo_and_keeps_with_its_pareto_probability(quality_model: str) -> None:
    model = fasttext.load_model(quality_model)
    rng = random.Random(5)
    texts = [_sentence(rng, rng.choice([HQ, LQ, HQ + LQ]), rng.randint(1, 12)) + f" {i}" for i in range(3000)]
    texts += ["with __label__lq inside", "two\nlines"]
    scores = np.array([_nemo_score(model, t) for t in texts])
    stage = FastTextQualityFilter(quality_model, alpha=3, seed=42)
    out = stage.process(_batch(texts)).data
    kept = out.column("n").to_numpy()
    assert out.column("fasttext_quality_score").to_pylist() == scores[kept].tolist()
    # P(pareto(alpha) > 1 - s) = (2 - s) ** -alpha (numpy's pareto is Lomax): the expected number kept
    expected = ((2.0 - scores) ** -3.0).sum()
    assert abs(len(kept) - expected) < 4 * np.sqrt(expected), (len(kept), expected)
    high, low = scores > 0.9, scores < 0.1
    assert high.sum() > 100 and low.sum() > 100
    assert np.isin(np.flatnonzero(high), kept).mean() > 0.8 > 0.3 > np.isin(np.flatnonzero(low), kept).mean()
    # each document's draw depends on seed and text only: the same survivors in any batching
    halves = [stage.process(_batch(part)).data for part in (texts[:1000], texts[1000:])]
    assert [r for h in halves for r in h.column("text").to_pylist()] == out.column("text").to_pylist()
    other = FastTextQualityFilter(quality_model, seed=7).process(_batch(texts)).data
    assert other.column("text").to_pylist() != out.column("text").to_pylist()
    with pytest.raises(TypeError, match="FastTextQualityFilter is a stage: add it to the pipeline itself"):
        ScoreFilter(stage)  # NeMo's spelling: a DocumentFilter inside ScoreFilter there, a stage here
    with pytest.raises(ValueError, match=r"label=.__label__good.*labels are"):
        FastTextQualityFilter(quality_model, label="__label__good").setup()


def test_fasttext_stages_in_a_pipeline_sharded_equal_unsharded(
    lid_model: str, quality_model: str, tmp_path: Path
) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    texts = _mixed_texts(6, 400)
    for f in range(4):
        with open(corpus / f"part{f}.jsonl", "w") as fh:
            for i, t in enumerate(texts[f::4]):
                fh.write(json.dumps({"text": t, "doc": f"{f}-{i}"}) + "\n")

    def pipeline(out: Path) -> Pipeline:
        return (
            Pipeline("fasttext")
            .add_stage(JsonlReader(str(corpus)))
            .add_stage(LanguageFilter(languages=["en", "de"], backend="fasttext", model_path=lid_model))
            .add_stage(FastTextClassifierFilter(quality_model, remove_labels=("lq", 0.9)))
            .add_stage(FastTextQualityFilter(quality_model))
            .add_stage(ParquetWriter(out))
        )

    result = pipeline(tmp_path / "whole").run(LocalExecutor(workers=2), ShardSpec.single())
    funnel = result.funnel()
    stages = [row.stage for row in funnel]
    assert stages[1:4] == ["language_filter", "fasttext_classifier_filter", "fasttext_quality_filter"]
    assert all(row.dropped > 0 for row in funnel[1:4])
    for shard in range(3):
        pipeline(tmp_path / "sharded").run(LocalExecutor(workers=1), ShardSpec.explicit(shard, 3))
    whole = pq.read_table(tmp_path / "whole").sort_by("doc")
    sharded = pq.read_table(tmp_path / "sharded").sort_by("doc")
    assert whole.num_rows == funnel[-1].rows_out > 0
    assert whole.equals(sharded)
    assert {"language", "language_score", "__label__hq", "__label__lq", "fasttext_quality_score"} <= set(
        whole.column_names
    )

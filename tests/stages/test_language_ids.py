"""LanguageFilter's fastText identifiers as datatrove's LanguageFilter runs them, ft176 and GlotLID (labels
``<language>_<script>``), with ``languages``, ``language_threshold``, ``label_only`` and
``keep_top_pairs_threshold``: every kept row and every column against datatrove's rule written out, on a
mixed-language corpus and a small model trained here; and against datatrove's own class where its venv is
(``CURATOR_DATATROVE_PYTHON``, as the bench's rows)."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_slurm import DocumentBatch
from curator_slurm.stages import LanguageFilter
from support.lidmodels import train_model

fasttext = pytest.importorskip("fasttext")

VOCAB = {
    "eng_Latn": "the river water report committee week quality annual people city house and not",
    "deu_Latn": "der fluss wasser bericht ausschuss woche qualität jahr menschen stadt haus und nicht",
    "rus_Cyrl": "река вода доклад комитет неделя качество год люди город дом и не",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A GlotLID-style model (``eng_Latn``, ...) and an lid.176-style one (``en``, ...), trained on one text."""
    rng = random.Random(0)
    lines = [(label, " ".join(rng.choice(words.split()) for _ in range(10))) for _ in range(150)
             for label, words in VOCAB.items()]  # fmt: skip
    where = tmp_path_factory.mktemp("lid")
    glot = train_model(where / "glotlid.bin", [f"__label__{label} {text}" for label, text in lines])
    ft176 = train_model(where / "lid176.bin", [f"__label__{label[:2]} {text}" for label, text in lines])
    return {"glotlid": glot, "ft176": ft176}


def corpus(seed: int = 2, n: int = 150) -> list[str]:
    """Documents mixing the languages in random proportions, over one or several lines."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        parts = [" ".join(rng.choice(rng.choice(list(VOCAB.values())).split()) for _ in range(rng.randint(2, 8)))
                 for _ in range(rng.randint(1, 4))]  # fmt: skip
        texts.append(rng.choice(["\n", " "]).join(parts))
    return [*texts, "", "\n"]


def datatrove_filter(model: Any, text: str, backend: str, languages: list[str] | None, threshold: float,
                     label_only: bool, top: float) -> tuple[bool, dict[str, Any]]:  # fmt: skip
    """datatrove 0.10's FastTextLID.predict and LanguageFilter.filter, written out: (kept, metadata)."""
    labels, probs = model.predict(text.replace("\n", " "), k=-1)
    pairs = {label.split("__")[2]: float(p) for label, p in zip(labels, probs, strict=True)}
    lang, score = max(pairs.items(), key=lambda kv: kv[1])
    chosen = {code: pairs.get(code, 0.0) for code in languages} if languages else pairs
    meta: dict[str, Any] = {}
    if backend == "glotlid":
        lang, meta["language_script"] = lang.split("_")
    meta.update(language=lang, language_score=score)
    if top != -1:
        meta.update({f"top_language_{k}_score": v for k, v in chosen.items() if v > top})
    keep = label_only or bool(languages and any(v > threshold for v in chosen.values()))
    return keep or (languages is None and score > threshold), meta


def ours(path: str, texts: list[str], backend: str, **options: Any) -> list[dict[str, Any]]:
    """The rows LanguageFilter keeps, each with its ``n`` and the columns it wrote (nulls left out)."""
    table = pa.table({"text": pa.array(texts, pa.string()), "n": list(range(len(texts)))})
    batch = DocumentBatch(task_id="t", data=table, metadata={"files": ["in.jsonl"]})
    out = LanguageFilter(backend=backend, model_path=path, **options).process(batch).data
    return [{k: v for k, v in row.items() if v is not None and k != "text"} for row in out.to_pylist()]


def expected(path: str, texts: list[str], backend: str, languages: list[str] | None, language_threshold: float,
             label_only: bool, top: float) -> list[dict[str, Any]]:  # fmt: skip
    model = fasttext.load_model(path)
    rows = []
    for n, text in enumerate(texts):
        keep, meta = datatrove_filter(model, text, backend, languages, language_threshold, label_only, top)
        if keep:
            rows.append({"n": n, **meta})
    return rows


@pytest.mark.parametrize("backend", ["glotlid", "ft176"])
@settings(max_examples=25, deadline=None)
@given(
    threshold=st.floats(0.0, 1.0),
    top=st.one_of(st.just(-1.0), st.floats(0.0, 1.0)),
    label_only=st.booleans(),
    which=st.sampled_from([None, ["eng_Latn"], ["deu_Latn", "rus_Cyrl"]]),
)
def test_keeps_and_labels_what_datatrove_does(
    models: dict[str, str], backend: str, threshold: float, top: float, label_only: bool, which: list[str] | None
) -> None:
    texts = corpus()
    languages = which if which is None or backend == "glotlid" else [code[:2] for code in which]
    options = dict(languages=languages, language_threshold=threshold, label_only=label_only)
    got = ours(models[backend], texts, backend, keep_top_pairs_threshold=top, **options)
    assert got == expected(models[backend], texts, backend, top=top, **options)  # type: ignore[arg-type]


def test_glotlid_writes_language_and_script_and_splits_no_label_it_cannot(models: dict[str, str]) -> None:
    rows = ours(models["glotlid"], corpus(), "glotlid", languages=None, label_only=True)
    assert {(r["language"], r["language_script"]) for r in rows} == {("eng", "Latn"), ("deu", "Latn"), ("rus", "Cyrl")}
    with pytest.raises(ValueError, match="not labels of"):
        LanguageFilter(languages=["eng"], backend="glotlid", model_path=models["glotlid"]).setup()
    with pytest.raises(ValueError, match="keep_top_pairs_threshold"):
        LanguageFilter(languages=["en"], keep_top_pairs_threshold=0.1)


#: datatrove's own LanguageFilter on the model file (its model property otherwise downloads one).
_DATATROVE = """
import json, sys
from fasttext.FastText import _FastText
from datatrove.data import Document
from datatrove.pipeline.filters import LanguageFilter
path, backend, languages, threshold, top, label_only = json.loads(sys.argv[1])
f = LanguageFilter(languages=languages, language_threshold=threshold, backend=backend,
                   keep_top_pairs_threshold=top, label_only=label_only)
f.model._model = _FastText(path)
out = []
for n, text in enumerate(json.load(sys.stdin)):
    doc = Document(text=text, id=str(n))
    if f.filter(doc):
        out.append({"n": n, **doc.metadata})
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    ("backend", "languages", "top"),
    [("glotlid", ["eng_Latn", "rus_Cyrl"], 0.05), ("glotlid", None, 0.2), ("ft176", ["de"], -1), ("ft176", None, 0.1)],
)
def test_against_datatrove_itself(
    models: dict[str, str], backend: str, languages: list[str] | None, top: float
) -> None:
    python = os.environ.get("CURATOR_DATATROVE_PYTHON", "/work/venvs/datatrove/bin/python")
    if not Path(python).exists():
        pytest.skip(f"datatrove's venv is not here ({python}; set CURATOR_DATATROVE_PYTHON)")
    texts = corpus(5, 200)
    for label_only in (False, True):
        arg = json.dumps([models[backend], backend, languages, 0.6, top, label_only])
        done = subprocess.run([python, "-c", _DATATROVE, arg], input=json.dumps(texts), capture_output=True,
                              text=True, check=True)  # fmt: skip
        theirs = json.loads(done.stdout)
        got = ours(models[backend], texts, backend, languages=languages, language_threshold=0.6,
                   keep_top_pairs_threshold=top, label_only=label_only)  # fmt: skip
        assert got == theirs and 0 < len(theirs) <= len(texts)

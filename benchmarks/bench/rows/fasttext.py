"""Rows ft1-ft2: the fastText stages against the model called in a plain per-document loop."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

import pyarrow as pa

from ..context import Bench
from ..harness import BenchError, Measure, Row, progress, rotated
from .filters import web_like_texts

_SPAM = [
    "buy",
    "cheap",
    "click",
    "free",
    "now",
    "win",
    "casino",
    "deal",
    "offer",
    "discount",
    "sale",
    "hot",
    "bonus",
    "prize",
    "winner",
]


def _spammy(rng: random.Random, text: str) -> str:
    """``text`` with two words in three replaced by spam words: the low-quality side."""
    return " ".join(rng.choice(_SPAM) if rng.random() < 0.67 else w for w in text.split(" "))


def _model(b: Bench, texts: list[str]) -> str:
    """A quality classifier trained by fastText on the bench's own text (``hq``: web-like documents,
    ``lq``: the same made spammy), kept in the bench directory."""
    import fasttext

    path = b.root / "fasttext" / "quality.bin"
    if path.exists():
        return str(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    lines = []
    for text in texts[:2000]:
        lines.append("__label__hq " + " ".join(text.split()))
        lines.append("__label__lq " + " ".join(_spammy(rng, text).split()))
    data = path.with_suffix(".txt")
    data.write_text("\n".join(lines) + "\n")
    for attempt in range(20):  # fastText 0.9.2's 0/0 progress race on a busy machine ("Encountered NaN")
        try:
            model = fasttext.train_supervised(str(data), epoch=5, dim=32, minn=2, maxn=4, thread=1, seed=1, verbose=0)
            break
        except RuntimeError:
            if attempt == 19:
                raise
    tmp = path.with_suffix(".tmp")
    model.save_model(str(tmp))
    tmp.rename(path)
    return str(path)


def bench_fasttext(b: Bench) -> list[Row]:
    """Row ft1: FastTextClassifierFilter (datatrove's, keep ``hq`` >= 0.5, label columns) on a batch of
    web-like documents, docs/s, against ``model.predict(text.strip().replace("\\n", ""), k=-1)`` per
    document and the same rule in a Python loop, as datatrove runs it. Row ft2: LanguageFilter's fastText
    backend (datatrove's ft176 rule) against its loop. One core, CPU time (prediction is single-threaded;
    on a shared machine wall time mostly measures the neighbours); the value compares the fastest samples."""
    from fasttext.FastText import _FastText

    from curator_slurm import DocumentBatch
    from curator_slurm.stages import FastTextClassifierFilter, LanguageFilter

    rng = random.Random(5)
    texts = [t if rng.random() < 0.5 else _spammy(rng, t) for t in web_like_texts(500 if b.quick else 20000, seed=3)]
    path = _model(b, web_like_texts(2000, seed=4))
    model = _FastText(path)
    batch = DocumentBatch(task_id="bench", data=pa.table({"text": texts}), metadata={})
    stages = {
        "ft1": FastTextClassifierFilter(path, keep_labels=("hq", 0.5)),
        "ft2": LanguageFilter(languages="hq", backend="fasttext", model_path=path, language_threshold=0.5),
    }

    def loop_classifier() -> int:
        kept = 0
        for text in texts:
            labels, scores = model.predict(text.strip().replace("\n", ""), k=-1)
            kept += dict(zip(labels, scores, strict=True)).get("__label__hq", -9e9) >= 0.5 and bool(text.strip())
        return kept

    def loop_language() -> int:
        kept = 0
        for text in texts:
            labels, scores = model.predict(text.replace("\n", " "), k=-1)
            pairs = {label.split("__")[2]: score.item() for label, score in zip(labels, scores, strict=True)}
            kept += pairs.get("hq", 0.0) > 0.5
        return kept

    loops = {"ft1": loop_classifier, "ft2": loop_language}
    rows = []
    for key, stage in stages.items():
        stage.setup()
        ours: list[float] = []
        theirs: list[float] = []
        counts: dict[str, int] = {}

        def time_stage(stage: Any = stage, out: list[float] = ours, counts: dict[str, int] = counts) -> None:
            start = time.process_time()
            counts["stage"] = stage.process(batch).num_items
            out.append(len(texts) / (time.process_time() - start))

        def time_loop(loop: Any = loops[key], out: list[float] = theirs, counts: dict[str, int] = counts) -> None:
            start = time.process_time()
            counts["loop"] = loop()
            out.append(len(texts) / (time.process_time() - start))

        for rep in range(b.micro_repeat):
            for measure in rotated([time_stage, time_loop], rep):
                measure()
        if counts["stage"] != counts["loop"]:
            raise BenchError(f"{key}: the stage keeps {counts['stage']} documents, the loop {counts['loop']}")
        progress(f"row {key}: {statistics.median(ours):.0f} vs {statistics.median(theirs):.0f} docs/s")
        title = "FastTextClassifierFilter" if key == "ft1" else "LanguageFilter(backend='fasttext')"
        rows.append(
            Row(
                key,
                f"{title}: stage / model.predict per document in a loop, docs per CPU s ({len(texts)} docs)",
                Measure("stage", "docs/s", ours),
                Measure("loop", "docs/s", theirs),
                ">=",
                0.9,
                value=max(ours) / max(theirs),
                note=f"value from the fastest of {len(ours)} samples of each side (CPU time); {counts['stage']} "
                "kept; fastText's own prediction is most of either side",
            )
        )
    return rows

"""datatrove's simple filters and formatters as stages of this package: in a pipeline, sharded into 3 array tasks
and resumed, they keep, rewrite and exclude exactly what one unsharded run does; their parameters are in the run
fingerprint; UnigramLogProbFilter reads the frequency file it is given (made here), and downloads nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_slurm import DocumentBatch, LocalExecutor, Pipeline, ShardSpec
from curator_slurm.stages import JsonlReader, JsonlWriter, ParquetWriter
from curator_slurm.stages.datatrove import (
    REASON_FIELD,
    C4ParagraphFilter,
    LambdaFilter,
    RegexFilter,
    SymbolLinesFormatter,
    UnigramLogProbFilter,
)

LONG = "x" * 210
TEXTS = [
    f"{LONG}\n{LONG}\n{LONG}",
    "short\nshort",
    f"{LONG}\n---\n{LONG}\n{LONG}\n!!!",
    f"Copyright 2020\n{LONG}\n{LONG}\n{LONG}",
    "keep me? no",
    f"{LONG} nope\n{LONG}\n{LONG}",
] * 4


def keep_without_nope(doc: Any) -> bool:
    return "nope" not in doc.text and doc.metadata["n"] >= 0


def _corpus(root: Path) -> Path:
    root.mkdir()
    for f in range(4):
        rows = [{"text": t, "n": i} for i, t in enumerate(TEXTS[f * 6 : (f + 1) * 6])]
        (root / f"part{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _pipeline(src: Path, out: Path) -> Pipeline:
    return Pipeline(
        "datatrove_simple",
        [
            JsonlReader(str(src)),
            SymbolLinesFormatter(),
            RegexFilter(r"(?i)copyright", exclusion_writer=JsonlWriter(str(out / "excluded_regex"))),
            C4ParagraphFilter(exclusion_writer=JsonlWriter(str(out / "excluded_c4"))),
            LambdaFilter(keep_without_nope),
            ParquetWriter(str(out / "kept")),
        ],
    )


def _texts(directory: Path) -> list[str]:
    found = [r["text"] for p in directory.glob("*.parquet") for r in pq.read_table(p).to_pylist()]
    found += [json.loads(line)["text"] for p in directory.glob("*.jsonl") for line in p.read_text().splitlines()]
    return sorted(found)


def test_the_blocks_in_a_pipeline_sharded_keep_what_one_run_keeps(tmp_path: Path) -> None:
    src = _corpus(tmp_path / "in")
    _pipeline(src, tmp_path / "whole").run(LocalExecutor(workers=1))
    assert _texts(tmp_path / "whole" / "kept") == sorted([f"{LONG}\n{LONG}\n{LONG}"] * 8)
    excluded_c4 = [
        json.loads(x) for p in (tmp_path / "whole" / "excluded_c4").glob("*.jsonl") for x in p.read_text().splitlines()
    ]
    assert {r[REASON_FIELD] for r in excluded_c4} == {"< 3 paragraphs"} and len(excluded_c4) == 8
    assert len(_texts(tmp_path / "whole" / "excluded_regex")) == 4
    for index in (2, 0, 1, 0):  # three array tasks, one of them twice: nothing lost, nothing twice
        _pipeline(src, tmp_path / "sharded").run(LocalExecutor(workers=1), shard=ShardSpec(index=index, count=3))
    for part in ("kept", "excluded_c4", "excluded_regex"):
        assert _texts(tmp_path / "sharded" / part) == _texts(tmp_path / "whole" / part), part


def test_parameters_and_functions_are_in_the_fingerprint(tmp_path: Path) -> None:
    assert RegexFilter("a").params() != RegexFilter("b").params()
    assert LambdaFilter(keep_without_nope).params() != LambdaFilter(lambda d: True).params()
    assert SymbolLinesFormatter().params() != SymbolLinesFormatter(replace_char="\n").params()


def _freq(path: Path, counts: dict[str, int]) -> str:
    path.write_text("word,count\n" + "".join(f"{w},{c}\n" for w, c in counts.items()))
    return str(path)


def test_unigram_log_prob_reads_the_file_it_is_given(tmp_path: Path) -> None:
    pytest.importorskip("spacy")
    counts = {"the": 50, "cat": 30, "sat": 20}
    f = UnigramLogProbFilter(logprobs_threshold=-3, unigram_freq_file=_freq(tmp_path / "u.csv", counts))
    texts = ["The cat sat", "Cacophony Pareidolia Serendipity", ""]
    scores = f.logprobs(pa.array(texts, pa.string()))
    assert scores[0] == pytest.approx((math.log(0.5) + math.log(0.3) + math.log(0.2)) / 3)
    assert scores[1] == pytest.approx(math.log(1e-9)) and scores[2] == 0
    batch = DocumentBatch(task_id="t", data=pa.table({"text": texts}))
    assert f.process(batch).data.column("text").to_pylist() == ["The cat sat", ""]
    other = UnigramLogProbFilter(logprobs_threshold=-3, unigram_freq_file=_freq(tmp_path / "v.csv", {"the": 1}))
    assert f.params() != other.params(), "the file's content is in the fingerprint"
    with pytest.raises(ValueError, match="downloads nothing"):
        UnigramLogProbFilter()

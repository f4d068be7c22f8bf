"""n-gram decontamination on a corpus with planted benchmark 13-gram overlaps (label, query and query-to-label
windows, case and punctuation changed, near misses one word short): the documents kept are datatrove 0.10's (its
own code where its venv is, ``CURATOR_DATATROVE_PYTHON``), in one run and as 3 array tasks, with exclusions
naming task and n-gram; the index's content is in the run fingerprint."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_slurm import LocalExecutor, Pipeline, ShardSpec
from curator_slurm.errors import InputError
from curator_slurm.stages import (
    JsonlReader,
    JsonlWriter,
    NGramsDecontConfig,
    NGramsDecontFilter,
    NGramsDecontIndexer,
    ParquetWriter,
)
from curator_slurm.stages.filters.decont import hash_func, simplify_text, word_lists

_VOCAB = (
    "amber basil cedar delta ember fjord grove harbor iris jasper kelp lumen maple nectar onyx prism "
    "quartz raven sable tundra umber violet willow xenon yarrow zephyr acorn bramble cobalt dune egret "
    "fennel garnet heron indigo juniper kestrel lotus marsh nutmeg orchid pebble quill ridge saffron "
    "thistle"
)
WORDS = _VOCAB.split()


def corpus() -> tuple[list[dict], list[dict]]:
    """(evaluation items, documents): three tasks' items, and documents of random words, some holding a planted
    window of an item (13 words: contaminated; 11 words: a near miss), with its case and punctuation changed."""
    rng = random.Random(13)
    items = []
    for t, task in enumerate(("arc", "hellaswag", "mmlu")):
        for i in range(5):
            query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20)))
            label = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 16)))
            items.append({"task": task, "query": query.capitalize() + "?", "text": f" {label} {t}{i}."})
    docs = []
    for d in range(60):
        words = [rng.choice(WORDS) for _ in range(rng.randint(20, 60))]
        kind = d % 5
        if kind in (1, 2, 3, 4):
            item = rng.choice(items)
            whole = (item["query"] + item["text"]).split() if kind != 4 else item["text"].split()
            size = 13 if kind in (1, 2, 4) else 11
            start = rng.randint(0, max(0, len(whole) - size))
            window = whole[start : start + size]
            if kind == 2:
                window = [w.upper() if rng.random() < 0.5 else w + "," for w in window]
            at = rng.randint(0, len(words))
            words[at:at] = window
        docs.append({"id": f"d{d:02d}", "text": " ".join(words)})
    return items, docs


#: The documents datatrove 0.10.1's NGramsDecontFilter keeps of corpus(), per (find_query_ngrams,
#: find_overlap_ngrams), as test_against_datatrove_itself checked.
EXPECTED: dict[tuple[bool, bool], list[str]] = {
    (False, False): [
        "d00",
        "d02",
        "d03",
        "d04",
        "d05",
        "d06",
        "d07",
        "d08",
        "d10",
        "d11",
        "d12",
        "d13",
        "d15",
        "d16",
        "d17",
        "d18",
        "d20",
        "d21",
        "d22",
        "d24",
        "d25",
        "d26",
        "d27",
        "d28",
        "d30",
        "d31",
        "d32",
        "d33",
        "d35",
        "d36",
        "d37",
        "d38",
        "d39",
        "d40",
        "d41",
        "d42",
        "d43",
        "d45",
        "d47",
        "d48",
        "d50",
        "d51",
        "d52",
        "d53",
        "d55",
        "d56",
        "d57",
        "d58",
        "d59",
    ],
    (False, True): [
        "d00",
        "d04",
        "d05",
        "d08",
        "d10",
        "d13",
        "d15",
        "d18",
        "d20",
        "d21",
        "d24",
        "d25",
        "d26",
        "d28",
        "d30",
        "d33",
        "d35",
        "d38",
        "d39",
        "d40",
        "d43",
        "d45",
        "d48",
        "d50",
        "d53",
        "d55",
        "d58",
        "d59",
    ],
    (True, False): [
        "d00",
        "d02",
        "d03",
        "d04",
        "d05",
        "d06",
        "d07",
        "d08",
        "d10",
        "d12",
        "d13",
        "d15",
        "d16",
        "d17",
        "d18",
        "d20",
        "d22",
        "d24",
        "d25",
        "d27",
        "d28",
        "d30",
        "d31",
        "d32",
        "d33",
        "d35",
        "d36",
        "d37",
        "d38",
        "d39",
        "d40",
        "d41",
        "d42",
        "d43",
        "d45",
        "d47",
        "d48",
        "d50",
        "d51",
        "d52",
        "d53",
        "d55",
        "d56",
        "d57",
        "d58",
        "d59",
    ],
    (True, True): [
        "d00",
        "d04",
        "d05",
        "d08",
        "d10",
        "d13",
        "d15",
        "d18",
        "d20",
        "d24",
        "d25",
        "d28",
        "d30",
        "d33",
        "d35",
        "d38",
        "d39",
        "d40",
        "d43",
        "d45",
        "d48",
        "d50",
        "d53",
        "d55",
        "d58",
        "d59",
    ],
}

_DATATROVE = r"""
import json, sys, tempfile, types
import numpy as np
from datatrove.data import Document
from datatrove.pipeline.decont.n_grams import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer
from datatrove.utils.hashing import create_hash_func
from datatrove.utils.word_tokenizers import load_word_tokenizer
items, docs, query, overlap = json.load(sys.stdin)
config = NGramsDecontConfig(find_query_ngrams=query, find_overlap_ngrams=overlap)
# The indexer's own compute_hashes; its run() would load lighteval tasks from the hub.
me = types.SimpleNamespace(config=config, tokenizer=load_word_tokenizer("en"))
me.hash_func = create_hash_func(config.hash_config)
folder = tempfile.mkdtemp()
hashes = {}
for item in items:
    hashes.setdefault(item["task"], set()).update(NGramsDecontIndexer.compute_hashes(me, item["text"], item["query"]))
for task, h in hashes.items():
    np.array(sorted(h), dtype=config.hash_config.np_descr).tofile(f"{folder}/{task}.index.hashes")
nfilter = NGramsDecontFilter(folder, config=config)
out = []
for d in docs:
    doc = Document(text=d["text"], id=d["id"])
    if nfilter.filter(doc) is True:
        out.append(d["id"])
print(json.dumps(out))
"""


def _index(folder: Path, query: bool, overlap: bool) -> NGramsDecontConfig:
    config = NGramsDecontConfig(find_query_ngrams=query, find_overlap_ngrams=overlap)
    NGramsDecontIndexer(str(folder), texts=corpus()[0], config=config).run()
    return config


def _write_corpus(folder: Path, docs: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(4):
        with open(folder / f"part{f}.jsonl", "w") as fh:
            fh.writelines(json.dumps(d) + "\n" for d in docs[f::4])
    return folder


CONFIGS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize(("query", "overlap"), CONFIGS)
def test_keeps_what_datatrove_keeps_whole_and_as_3_array_tasks(tmp_path: Path, query: bool, overlap: bool) -> None:
    _, docs = corpus()
    config = _index(tmp_path / "index", query, overlap)
    source = _write_corpus(tmp_path / "in", docs)

    def pipeline(out: str) -> Pipeline:
        nfilter = NGramsDecontFilter(str(tmp_path / "index"), config=config)
        return (
            Pipeline("decont")
            .add_stage(JsonlReader(str(source)))
            .add_stage(nfilter.with_(exclusion_writer=JsonlWriter(str(tmp_path / out / "removed"))))
            .add_stage(ParquetWriter(str(tmp_path / out / "kept")))
        )

    first = pipeline("whole").run(LocalExecutor(workers=1), ShardSpec.single())
    assert sum(row.rows_in for row in first.funnel()) > 0
    for shard in range(3):
        pipeline("sharded").run(LocalExecutor(workers=1), ShardSpec.explicit(shard, 3))
    again = pipeline("sharded").run(LocalExecutor(workers=1), ShardSpec.explicit(1, 3))  # resumed: nothing left
    assert sum(row.rows_in for row in again.funnel()) == 0
    for out in ("whole", "sharded"):
        kept = sorted(pq.read_table(tmp_path / out / "kept").column("id").to_pylist())
        assert kept == EXPECTED[(query, overlap)]
        files = sorted((tmp_path / out / "removed").glob("*.jsonl"))
        removed = [json.loads(line) for f in files for line in f.read_text().splitlines()]
        assert sorted(r["id"] for r in removed) == sorted({d["id"] for d in docs} - set(kept))
        hasher = hash_func(config.hash_config)
        for row in removed:  # the task and the n-gram behind each removal: one of the task's own n-grams
            assert row["filter_reason"] == "contaminated"
            gram = row["contaminated_ngram"]
            assert len(gram.split()) == 12 and gram in " ".join(word_lists([row["text"]], config.norm_config)[0])
            index = (tmp_path / "index" / f"{row['contaminated_task']}.index.hashes").read_bytes()
            assert hasher(gram).to_bytes(8, "little") in [index[i : i + 8] for i in range(0, len(index), 8)]


def test_indexer_as_sharded_pipeline_stage_builds_the_same_index(tmp_path: Path) -> None:
    items, docs = corpus()
    evals = tmp_path / "evals"
    evals.mkdir()
    for f in range(3):
        with open(evals / f"e{f}.jsonl", "w") as fh:
            fh.writelines(json.dumps(i) + "\n" for i in items[f::3])
    for shard in range(3):
        Pipeline("index").add_stage(JsonlReader(str(evals))).add_stage(
            NGramsDecontIndexer(str(tmp_path / "index"))
        ).run(LocalExecutor(workers=1), ShardSpec.explicit(shard, 3))
    NGramsDecontIndexer(str(tmp_path / "whole"), texts_file=str(evals / "e0.jsonl")).run()
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    NGramsDecontIndexer(str(tmp_path / "ref"), texts_file=str(tmp_path / "items.jsonl")).run()
    from curator_slurm.stages.filters.decont import index_files

    assert len(index_files(str(tmp_path / "index"))) == 9  # three tasks in each of three source files
    import pyarrow as pa

    from curator_slurm import DocumentBatch

    batch = DocumentBatch(
        task_id="t", data=pa.table({"text": [d["text"] for d in docs], "id": [d["id"] for d in docs]})
    )
    kept = {}
    for name in ("index", "ref"):
        nfilter = NGramsDecontFilter(str(tmp_path / name))
        nfilter.setup()
        kept[name] = sorted(nfilter.process(batch).data.column("id").to_pylist())
    assert kept["index"] == kept["ref"] == EXPECTED[(False, True)]


def test_index_content_is_in_the_fingerprint(tmp_path: Path) -> None:
    items, _ = corpus()
    NGramsDecontIndexer(str(tmp_path), texts=items).run()
    before = NGramsDecontFilter(str(tmp_path))
    assert NGramsDecontFilter(str(tmp_path)).params() == before.params()
    NGramsDecontIndexer(
        str(tmp_path), texts=[*items, "one more label of thirteen words to make one more twelve gram"]
    ).run()
    after = NGramsDecontFilter(str(tmp_path))
    assert after.params()["index_digest"] != before.params()["index_digest"]
    with pytest.raises(InputError, match="changed since"):
        before.setup()  # made before the index changed: it refuses to run against another index
    with pytest.raises(InputError, match="build the index first"):
        NGramsDecontFilter(str(tmp_path / "empty"))


def test_simplify_text_normalises_as_datatrove() -> None:
    assert simplify_text("  Héllo,\tWORLD!! 3.14 and 1,000 ", NGramsDecontConfig().norm_config) == "hello world 0 and 0"


@pytest.mark.parametrize(("query", "overlap"), CONFIGS)
def test_against_datatrove_itself(query: bool, overlap: bool) -> None:
    python = os.environ.get("CURATOR_DATATROVE_PYTHON", "/work/venvs/datatrove/bin/python")
    if not Path(python).exists():
        pytest.skip(f"datatrove's venv is not here ({python}; set CURATOR_DATATROVE_PYTHON)")
    items, docs = corpus()
    done = subprocess.run([python, "-c", _DATATROVE], input=json.dumps([items, docs, query, overlap]),
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(done.stdout) == EXPECTED[(query, overlap)]


@settings(max_examples=25, deadline=None)
@given(
    label=st.lists(st.sampled_from(WORDS), min_size=12, max_size=30),
    before=st.lists(st.sampled_from(WORDS), max_size=20),
    at=st.integers(0, 18),
    shout=st.booleans(),
)
def test_any_label_window_of_12_words_is_found(
    tmp_path_factory: pytest.TempPathFactory, label: list[str], before: list[str], at: int, shout: bool
) -> None:
    folder = tmp_path_factory.mktemp("index")
    NGramsDecontIndexer(str(folder), texts=[{"task": "t", "text": " ".join(label)}]).run()
    window = label[at : at + 12] if at + 12 <= len(label) else label[-12:]
    planted = [w.upper() for w in window] if shout else window
    texts = [" ".join([*before, *planted, "end."]), " ".join([*before, *window[:11], "end."])]
    import pyarrow as pa

    from curator_slurm import DocumentBatch

    nfilter = NGramsDecontFilter(str(folder))
    nfilter.setup()
    batch = DocumentBatch(task_id="t", data=pa.table({"text": texts, "id": ["hit", "short"]}))
    decision = nfilter.decide(nfilter.texts(batch), batch)
    grams = {" ".join(label[i : i + 12]) for i in range(len(label) - 11)}
    assert not decision.keep[0]  # the window is found, whatever its case
    for row in (0, 1):  # and a removal always names one of the label's own 12-grams (the short row's by chance)
        if not decision.keep[row]:
            assert decision.details["contaminated_ngram"][row].as_py() in grams
            assert decision.details["contaminated_task"][row].as_py() == "t"

"""MegatronTokenizerWriter: every document's sequence is ``tokenizer.encode(text).ids + [eos]`` (read back with a
reader written from Megatron's documented layout), once, in the input's order; dtype by vocabulary size;
empty and null texts; the tokenizer's own EOS and BOS; tokens in the ledger and in `curator-slurm status`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from curator_slurm import Pipeline
from curator_slurm.errors import InputError
from curator_slurm.stages import JsonlReader, MegatronTokenizerWriter
from support.helpers import clean_env, records
from support.megatron_files import (
    EOT,
    corpus_texts,
    pairs,
    python_docs_text,
    read_megatron,
    sequences_of,
    train_tokenizer,
)

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Python's docstrings as a JSONL corpus of 5 files, with an empty and a null text in file 2."""
    root = tmp_path_factory.mktemp("docs")
    texts = python_docs_text()
    per = len(texts) // 5 + 1
    for i in range(5):
        rows = [{"id": f"{i}-{j}", "text": t} for j, t in enumerate(texts[i * per : (i + 1) * per])]
        if i == 2:
            rows[3:3] = [{"id": "empty", "text": ""}, {"id": "null", "text": None}]
        (root / f"f{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture(scope="module")
def small_tokenizer(docs: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    return path, train_tokenizer(path, list(corpus_texts(docs)), vocab_size=1500)


@pytest.fixture(scope="module")
def large_tokenizer(docs: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    path = tmp_path_factory.mktemp("bigtok") / "tokenizer.json"
    return path, train_tokenizer(path, list(corpus_texts(docs)), vocab_size=1500, extra_tokens=70_000)


def expected_per_file(docs: Path, tokenizer: object, head: list[int], tail: list[int]) -> list[list[list[int]]]:
    out = []
    for path in sorted(docs.glob("*.jsonl")):
        texts = [json.loads(line)["text"] for line in path.read_text().splitlines()]
        encode = tokenizer.encode  # type: ignore[attr-defined]
        out.append([head + encode(t, add_special_tokens=False).ids + tail for t in texts if t])
    return out


def tokenize(docs: Path, out: Path, tokenizer: Path, **kwargs: object) -> None:
    writer = MegatronTokenizerWriter(out, model_identifier=tokenizer, **kwargs)  # type: ignore[arg-type]
    Pipeline("tok").add_stage(JsonlReader(docs)).add_stage(writer).run()


@pytest.mark.parametrize(("which", "code"), [("small", 8), ("large", 4)])
def test_every_document_is_its_encoding_plus_eos_once(
    docs: Path, tmp_path: Path, which: str, code: int, request: pytest.FixtureRequest
) -> None:
    path, tokenizer = request.getfixturevalue(f"{which}_tokenizer")
    eos = tokenizer.token_to_id(EOT)  # type: ignore[attr-defined]
    assert (eos > 65535) == (which == "large")
    out = tmp_path / "out"
    tokenize(docs, out, path, eod_token=EOT, tokenization_batch_size=7)  # batches cut documents of one file
    got = [read_megatron(p) for p in pairs(out)]
    assert {g["code"] for g in got} == {code}  # uint16 (8) for 1.5k tokens, int32 (4) past 65536
    # One pair per source file, each holding that file's documents in order: compare as a set of files.
    mine = sorted(sequences_of(p) for p in pairs(out))
    assert mine == sorted(expected_per_file(docs, tokenizer, [], [eos]))
    assert all(s[-1] == eos for f in mine for s in f)


def sparse_tokenizer(path: Path, ids: dict[str, int], added: dict[str, int]) -> Path:
    """A word-level ``tokenizer.json`` whose few tokens have the ids given (``added``: its added tokens): a
    vocabulary of 4 entries may still hold the id 70000."""
    tokens = [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True}
        for t, i in added.items()
    ]  # fmt: skip
    path.write_text(
        json.dumps({
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": tokens, "normalizer": None,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {**ids, **added}, "unk_token": "[UNK]"},
        })
    )  # fmt: skip
    return path


@pytest.mark.parametrize(
    ("vocab", "added", "options", "code"),
    [
        ({"[UNK]": 0, "hello": 1, "world": 2}, {"<eos>": 70000}, {"eod_token": "<eos>"}, 4),  # the eos id decides
        ({"[UNK]": 0, "hello": 1}, {"<eos>": 2, "<big>": 70000}, {"eod_token": "<eos>"}, 4),  # an added token
        ({"[UNK]": 0, "hello": 1, "world": 70000}, {"<eos>": 2}, {"eod_token": "<eos>"}, 4),  # a model token
        ({"[UNK]": 0, "hello": 1}, {"<eos>": 2, "<bos>": 65535}, {"eod_token": "<eos>", "bos_token": "<bos>"}, 8),
        ({"[UNK]": 0, "hello": 1}, {"<eos>": 2, "<bos>": 65536}, {"eod_token": "<eos>", "bos_token": "<bos>"}, 4),
    ],
)
def test_the_dtype_holds_the_largest_id_not_the_vocabulary_size(
    tmp_path: Path, vocab: dict[str, int], added: dict[str, int], options: dict[str, str], code: int
) -> None:
    """Ids are what the dtype must hold: a tokenizer of a handful of entries whose EOS (or an added token, or a
    model token) is 70000 gets int32 when the stage is built, and every id reads back exactly."""
    from tokenizers import Tokenizer

    path = sparse_tokenizer(tmp_path / "tokenizer.json", vocab, added)
    docs = tmp_path / "docs"
    docs.mkdir()
    texts = ["hello world", " ".join(added), "world hello hello", "unknown words"]
    (docs / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    writer = MegatronTokenizerWriter(tmp_path / "out", model_identifier=path, **options)
    assert writer.dtype.itemsize == (2 if code == 8 else 4)  # known when the stage is built
    Pipeline("tok").add_stage(JsonlReader(docs)).add_stage(writer).run()
    tokenizer = Tokenizer.from_file(str(path))
    head = [added["<bos>"]] if "bos_token" in options else []
    expected = [head + tokenizer.encode(t, add_special_tokens=False).ids + [added["<eos>"]] for t in texts]
    assert max(i for s in expected for i in s) == max({**vocab, **added}.values())  # the largest id is written
    (only,) = pairs(tmp_path / "out")
    got = read_megatron(only)
    assert got["code"] == code
    assert got["sequences"] == expected


def test_empty_and_null_texts_get_no_sequence_and_show_as_dropped(docs: Path, small_tokenizer: tuple, tmp_path: Path):
    path, _ = small_tokenizer
    out = tmp_path / "out"
    tokenize(docs, out, path, eod_token=EOT)
    total = sum(len(line.splitlines()) for line in [p.read_text() for p in docs.glob("*.jsonl")])
    stages = [r["stages"] for r in records(out) if r["status"] == "done"]
    writer_rows = [s for stage in stages for s in stage if s[0] == "megatron_tokenizer_writer"]
    assert sum(r[1] for r in writer_rows) == total and sum(r[2] for r in writer_rows) == total - 2
    assert sum(len(sequences_of(p)) for p in pairs(out)) == total - 2
    # A file of nothing but empty texts still gets its (empty) pair, which Megatron's layout allows.
    blank = tmp_path / "blank"
    blank.mkdir()
    (blank / "b.jsonl").write_text('{"text": ""}\n{"text": null}\n')
    tokenize(blank, tmp_path / "blank-out", path, eod_token=EOT)
    (only,) = pairs(tmp_path / "blank-out")
    assert read_megatron(only) == {"version": 1, "code": 8, "sequences": [], "document_index": [0]}


def test_tokenizer_directory_gives_its_own_eos_and_bos_is_optional(docs: Path, small_tokenizer: tuple, tmp_path: Path):
    path, tokenizer = small_tokenizer
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "tokenizer.json").write_bytes(path.read_bytes())
    (directory / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": EOT}, "bos_token": None}))
    eos = tokenizer.encode(EOT).ids[0]  # type: ignore[attr-defined]
    bos = tokenizer.token_to_id("e")  # type: ignore[attr-defined]
    out = tmp_path / "out"
    tokenize(docs, out, directory, bos_token="e")
    assert sorted(sequences_of(p) for p in pairs(out)) == sorted(expected_per_file(docs, tokenizer, [bos], [eos]))
    no_eos = tmp_path / "no-eos"
    tokenize(docs, no_eos, path, append_eod=False)
    assert sorted(sequences_of(p) for p in pairs(no_eos)) == sorted(expected_per_file(docs, tokenizer, [], []))


def test_clear_errors_before_any_work(small_tokenizer: tuple, tmp_path: Path) -> None:
    path, _ = small_tokenizer
    with pytest.raises(InputError, match="never downloaded"):
        MegatronTokenizerWriter(tmp_path / "o", model_identifier="gpt2")
    with pytest.raises(InputError, match=r"declares no eos_token.*eod_token="):
        MegatronTokenizerWriter(tmp_path / "o", model_identifier=path)
    with pytest.raises(InputError, match=r"eod_token '<nope>' is not a token of"):
        MegatronTokenizerWriter(tmp_path / "o", model_identifier=path, eod_token="<nope>")
    with pytest.raises(InputError, match=r"needs a tokenizer\.json"):
        MegatronTokenizerWriter(tmp_path / "o", model_identifier=tmp_path)


def test_a_damaged_tokenizer_is_named_with_what_is_wrong_when_the_stage_is_built(
    small_tokenizer: tuple, docs: Path, tmp_path: Path
) -> None:
    path, _ = small_tokenizer
    truncated = tmp_path / "cut" / "tokenizer.json"
    truncated.parent.mkdir()
    truncated.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(InputError, match=rf"{truncated}: .*EOF while parsing.*tokenizer\.json"):
        MegatronTokenizerWriter(tmp_path / "o", model_identifier=truncated, eod_token=EOT)
    with pytest.raises(InputError, match=rf"{truncated}: "):  # a directory holding it: the file is named
        MegatronTokenizerWriter(tmp_path / "o", model_identifier=truncated.parent, eod_token=EOT)
    not_a_tokenizer = tmp_path / "other.json"
    not_a_tokenizer.write_text('{"vocab": {"a": 1}}')
    with pytest.raises(InputError, match=rf"{not_a_tokenizer}: "):
        MegatronTokenizerWriter(tmp_path / "o", model_identifier=not_a_tokenizer, eod_token=EOT)
    # A tokenizer directory whose tokenizer_config.json (where its eos_token is declared) is damaged.
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "tokenizer.json").write_bytes(path.read_bytes())
    (directory / "tokenizer_config.json").write_text('{"eos_token": "<|endof')
    with pytest.raises(InputError, match=rf"{directory / 'tokenizer_config.json'}: "):
        MegatronTokenizerWriter(tmp_path / "o", model_identifier=directory)
    # The tokenization recipe says it in one line, before any work, with no traceback.
    script = Path(__file__).parents[2] / "examples" / "tokenize_corpus.py"
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(script), "--input", str(docs), "--output", str(out), "--tokenizer", str(truncated),
         "--eos-token", EOT],
        env=clean_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and str(truncated) in done.stderr
    assert not out.exists()


def test_the_fingerprint_sees_the_tokenizer_bytes_not_its_path(small_tokenizer: tuple, tmp_path: Path) -> None:
    path, _ = small_tokenizer
    copy = tmp_path / "copy.json"
    copy.write_bytes(path.read_bytes())
    a = MegatronTokenizerWriter(tmp_path / "o", model_identifier=path, eod_token=EOT).params()
    assert a == MegatronTokenizerWriter(tmp_path / "o", model_identifier=copy, eod_token=EOT).params()
    changed = json.loads(path.read_text())
    changed["model"]["vocab"]["zzzz"] = len(changed["model"]["vocab"]) + 5
    copy.write_text(json.dumps(changed))
    assert a != MegatronTokenizerWriter(tmp_path / "o", model_identifier=copy, eod_token=EOT).params()


def test_ledger_records_tokens_and_status_prints_the_total(docs: Path, small_tokenizer: tuple, tmp_path: Path):
    path, _ = small_tokenizer
    out = tmp_path / "out"
    tokenize(docs, out, path, eod_token=EOT)
    done = [r for r in records(out) if r["status"] == "done"]
    on_disk = {str(p): sum(len(s) for s in sequences_of(p)) for p in pairs(out)}
    assert {r["outputs"][0][: -len(".bin")]: r["tokens"] for r in done} == on_disk
    status = subprocess.run(
        [sys.executable, "-m", "curator_slurm.cli", "status", str(out / ".curator-run")],
        env=clean_env(), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"tokens: {sum(on_disk.values())} in the outputs of the done source tasks" in status

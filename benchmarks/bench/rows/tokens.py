"""Rows t1-t3 (issue #28): tokenizing into Megatron files. t1: the tokenize phase on one worker against a bare
loop (``encode_batch`` + numpy writes of the same files), tokens/s; t2: two workers against one; t3: peak RSS of
the merge phase (every pair into one file) on a corpus 4x larger against the base one.

Every side is a fresh process (``run_child``), timed from its start to its exit, with one ``tokenizers`` thread
(the writer's default ``tokenizer_threads=1``; the bare loop gets ``TOKENIZERS_PARALLELISM=false``), so the
workers are the only parallelism. The module is not called ``tokenize.py``: that name shadows Python's own
``tokenize`` module for any script run from its directory."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import xxhash

from ..context import Bench
from ..corpora import Corpus, CorpusSpec, ensure_corpus
from ..demo import REPO
from ..harness import BenchError, Measure, Row, available_cores, fresh_dir, progress, rotated, run_child

EOT = "<|endoftext|>"
SCRIPT = REPO / "examples" / "tokenize_corpus.py"

#: The framework side: the tokenize phase as a plain pipeline (reader -> writer, run directory and all).
FRAMEWORK = """
import sys
from curator_slurm import LocalExecutor, Pipeline
from curator_slurm.stages import JsonlReader, MegatronTokenizerWriter
src, out, tok, workers = sys.argv[1:5]
writer = MegatronTokenizerWriter(out, tok, eod_token="<|endoftext|>")
result = Pipeline("bench-tokenize").add_stage(JsonlReader(src).with_fields(["text"])).add_stage(writer).run(
    LocalExecutor(workers=int(workers)))
print(result.tokens)
"""

#: The bare loop: what a user would write by hand for the same files (no ledger, no temporary names, no fsync).
BARE = """
import glob, os, struct, sys
import numpy as np, pyarrow.json as pj
from tokenizers import Tokenizer
src, out, tok = sys.argv[1:4]
tokenizer = Tokenizer.from_file(tok)
eos = tokenizer.token_to_id("<|endoftext|>")
dtype = np.dtype(np.uint16 if tokenizer.get_vocab_size() <= 65536 else np.int32)
total = 0
for path in sorted(glob.glob(os.path.join(src, "*.jsonl"))):
    texts = pj.read_json(path, read_options=pj.ReadOptions(block_size=16 << 20)).column("text").to_pylist()
    texts = [t for t in texts if t]
    lengths = []
    stem = os.path.join(out, os.path.basename(path)[: -len(".jsonl")])
    with open(stem + ".bin", "wb") as f:
        for i in range(0, len(texts), 1000):
            ids = [e.ids + [eos] for e in tokenizer.encode_batch(texts[i : i + 1000], add_special_tokens=False)]
            lengths += [len(x) for x in ids]
            f.write(np.concatenate([np.asarray(x, dtype) for x in ids]).tobytes())
    lengths = np.asarray(lengths, np.int32)
    pointers = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)]).astype(np.int64) * dtype.itemsize
    with open(stem + ".idx", "wb") as f:
        f.write(b"MMIDIDX\\x00\\x00" + struct.pack("<QBQQ", 1, 8 if dtype == np.uint16 else 4, len(lengths),
                len(lengths) + 1))
        f.write(lengths.tobytes() + pointers.tobytes() + np.arange(len(lengths) + 1, dtype=np.int64).tobytes())
    total += int(lengths.sum())
print(total)
"""


def bench_tokenizer(b: Bench, corpus: Corpus) -> Path:
    """A byte-level BPE tokenizer (8,000 tokens and ``<|endoftext|>``) trained on the corpus' first files, made
    once under the bench directory."""
    path = b.root / "tokenizers" / f"bpe-8000-{corpus.spec.name}.json"
    if not path.exists():
        progress(f"training a BPE tokenizer on {corpus.spec.name} (untimed)")
        path.parent.mkdir(parents=True, exist_ok=True)
        code = (
            "import json, sys\n"
            "from tokenizers import Tokenizer, models, pre_tokenizers, trainers\n"
            "tok = Tokenizer(models.BPE()); tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)\n"
            "texts = [json.loads(l)['text'] for p in sys.argv[2:] for l in open(p)]\n"
            "tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=8000, special_tokens=['<|endoftext|>'], "
            "initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))\n"
            "tok.save(sys.argv[1] + '.tmp')\n"
        )
        run_child([sys.executable, "-c", code, str(path), *map(str, corpus.files[:2])])
        Path(str(path) + ".tmp").rename(path)
    return path


def bin_digests(out: Path) -> list[str]:
    """The contents of the ``.bin`` files of a directory, as sorted digests (names differ between the sides)."""
    return sorted(xxhash.xxh64_hexdigest(p.read_bytes()) for p in out.glob("*.bin") if not p.name.startswith("."))


def bench_tokens(b: Bench) -> list[Row]:
    """Rows t1, t1c, t2 and t2c: tokens/s of the tokenize phase (1 and 2 workers) and of the bare loop, interleaved;
    t1c and t2c divide tokens by CPU seconds instead of wall seconds (both sides are one thread of CPU-bound work)."""
    corpus = ensure_corpus(
        b.root / "corpora", CorpusSpec(files=8 if b.quick else 40, docs_per_file=b.docs_per_file // 2)
    )
    tok = bench_tokenizer(b, corpus)
    b.warm_children()
    sides = {
        "bare": ([sys.executable, "-c", BARE], [], {"TOKENIZERS_PARALLELISM": "false"}),
        "w1": ([sys.executable, "-c", FRAMEWORK], ["1"], {}),
        "w2": ([sys.executable, "-c", FRAMEWORK], ["2"], {}),
    }
    rates: dict[str, list[float]] = {k: [] for k in sides}
    cpu_rates: dict[str, list[float]] = {k: [] for k in sides}
    seen: dict[str, tuple[int, list[str]]] = {}
    for rep in range(b.repeat):
        for name in rotated(list(sides), rep):
            cmd, tail, env = sides[name]
            progress(f"rows t1-t2: {name}, repeat {rep + 1}/{b.repeat} ({corpus.size}, {len(corpus.files)} files)")
            with fresh_dir(b.out(f"tok-{name}")) as out:
                child = run_child([*cmd, str(corpus.path), str(out), str(tok), *tail], extra=env)
                tokens = int(child.stdout.strip().splitlines()[-1])
                seen[name] = (tokens, bin_digests(out))
            rates[name].append(tokens / child.wall)
            cpu_rates[name].append(tokens / child.cpu)
    if len({v[0] for v in seen.values()}) != 1 or len({tuple(v[1]) for v in seen.values()}) != 1:
        raise BenchError(f"rows t1-t2: the sides wrote different tokens: { {k: v[0] for k, v in seen.items()} }")
    size = f"{corpus.size}, {len(corpus.files)} files, {seen['bare'][0]:,} tokens"
    m = {k: Measure(label, "tokens/s", rates[k]) for k, label in
         (("bare", "bare loop"), ("w1", "workers=1"), ("w2", "workers=2"))}  # fmt: skip
    cpu = {k: Measure(label, "tokens/s", cpu_rates[k]) for k, label in
           (("bare", "bare loop"), ("w1", "workers=1"), ("w2", "workers=2"))}  # fmt: skip
    return [
        Row("t1", f"tokenize tokens/s, whole process: workers=1 / bare encode_batch + numpy loop ({size})",
            m["w1"], m["bare"], ">=", 0.9, note="the same .bin bytes on both sides (checked)"),
        Row("t1c", f"tokenize tokens per CPU second (user + sys), whole process: workers=1 / bare loop ({size})",
            cpu["w1"], cpu["bare"], ">=", 0.9, note="CPU time: t1 without the rest of the machine's load"),
        Row("t2", f"tokenize tokens/s, whole process: workers=2 / workers=1 ({size}, {available_cores()} cores)",
            m["w2"], m["w1"], ">=", 1.8),
        Row("t2c", f"tokenize tokens per CPU second, whole process: workers=2 / workers=1 ({size})",
            cpu["w2"], cpu["w1"], ">=", 0.9, note="no CPU lost to oversubscription: one tokenizers thread per worker"),
    ]  # fmt: skip


def bench_merge_rss(b: Bench) -> list[Row]:
    """Row t3: peak RSS of the merge phase alone (a fresh process, ``CURATOR_PHASE=merge``, every pair merged into
    one file) on a corpus 4x larger (4x the files, the documents and the tokens) against the base one."""
    files = 4 if b.quick else 16
    small = ensure_corpus(b.root / "corpora", CorpusSpec(files=files, docs_per_file=b.docs_per_file))
    large = ensure_corpus(b.root / "corpora", CorpusSpec(files=4 * files, docs_per_file=b.docs_per_file))
    tok = bench_tokenizer(b, small)
    outs: dict[str, Path] = {}
    for name, corpus in (("small", small), ("large", large)):
        out = b.out(f"merge-{name}")
        progress(f"row t3: tokenizing the {name} corpus once ({corpus.size}; untimed)")
        shutil.rmtree(out, ignore_errors=True)
        run_child([sys.executable, str(SCRIPT), "--input", str(corpus.path), "--output", str(out), "--tokenizer",
                   str(tok), "--eos-token", EOT], extra={"CURATOR_PHASE": "tokenize"})  # fmt: skip
        outs[name] = out
    rss: dict[str, list[float]] = {"small": [], "large": []}
    tokens: dict[str, int] = {}
    for rep in range(b.repeat):
        for name in rotated(["small", "large"], rep):
            out = outs[name]
            progress(f"row t3: merge of the {name} corpus, repeat {rep + 1}/{b.repeat}")
            for p in out.glob("part_*"):
                p.unlink()
            shutil.rmtree(out / ".curator-work" / ".curator-run" / "merge", ignore_errors=True)
            corpus = large if name == "large" else small
            cmd = [sys.executable, str(SCRIPT), "--input", str(corpus.path), "--output", str(out)]
            child = run_child([*cmd, "--tokenizer", str(tok), "--eos-token", EOT], extra={"CURATOR_PHASE": "merge"})
            rss[name].append(child.maxrss)
            tokens[name] = (out / "part_00000.bin").stat().st_size // 2
    for out in outs.values():
        shutil.rmtree(out, ignore_errors=True)
    return [
        Row("t3", f"merge phase peak RSS, one output file: {large.size} corpus / {small.size} corpus "
            f"({tokens['large']:,} vs {tokens['small']:,} tokens, {len(large.files)} vs {len(small.files)} pairs)",
            Measure(large.size, "B", rss["large"]), Measure(small.size, "B", rss["small"]), "<=", 1.1,
            note="the merge streams 1M-entry chunks of each .idx section and 8 MiB of .bin at a time"),
    ]  # fmt: skip


__all__ = ["bench_merge_rss", "bench_tokens"]

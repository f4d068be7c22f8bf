"""datatrove's FineWeb recipe (run with the Python of a venv holding datatrove 0.10), for rows fw1 and fw2.

    python datatrove_fineweb.py prepare LISTS_DIR LID_MODEL
    python datatrove_fineweb.py run INPUT_DIR OUTPUT_DIR TIME_LIMIT [--dedup]
        -> {"pages", "docs", "urls", "survivors", "base_docs", "base_urls", "seconds", "stages"}

``prepare`` puts LID_MODEL where datatrove's ``LanguageFilter(backend="ft176")`` looks for lid.176.bin (its asset
cache, under ``HF_ASSETS_CACHE``: the machine is offline, so the model is one the bench trained), unpacks the
URL block lists datatrove ships with its package, and copies them into LISTS_DIR for curator-slurm's
``URLFilter(blocklist_dir=...)``. ``run`` is the recipe as datatrove's ``examples/fineweb.py`` chains it, one
worker: ``WarcReader -> URLFilter -> Trafilatura(favour_precision) -> LanguageFilter(en) -> Gopher repetition
-> Gopher quality -> C4 quality(filter_no_terminal_punct=False) -> FineWeb quality -> JsonlWriter``, then
``JsonlReader -> PIIFormatter -> JsonlWriter`` (the recipe's last step, after its dedup). With ``--dedup`` (row
fw2) the MinHash stages come between, as the recipe runs them (FineWeb's ``MinhashConfig``: 5-grams, 14 buckets
of 8 hashes, sha1 at 64 bits): ``JsonlReader -> MinhashDedupSignature``, ``MinhashDedupBuckets`` (one task per
bucket, run one after another on the one worker), ``MinhashDedupCluster``, then ``JsonlReader ->
MinhashDedupFilter -> PIIFormatter -> JsonlWriter`` (the recipe's fourth MinHash step, which formats PII too;
its ``TokensCounter`` is left out: it downloads a tokenizer, and ours counts no tokens). ``seconds`` is every
executor's run, ``stages`` each step's time from datatrove's own stats. One task reads every file: datatrove
sets its steps up per task (the URL lists, the model), ours per worker, so one task per file (datatrove's usual
layout, here of small files) would charge datatrove that setup four times. This file imports datatrove;
curator-slurm's benchmark runs it as a subprocess.
"""

import hashlib
import json
import os
import shutil
import sys
import time


def prepare(lists_dir: str, model: str) -> None:
    from datatrove.io import strip_protocol
    from datatrove.pipeline.filters import URLFilter
    from datatrove.utils.lid import FT176LID
    from huggingface_hub import cached_assets_path

    where = cached_assets_path(library_name="datatrove", namespace="lid", subfolder=FT176LID.MODEL_SUBFOLDER)
    target = os.path.join(where, strip_protocol(FT176LID.MODEL_URL).replace("/", "_"))
    if os.path.lexists(target):
        os.remove(target)
    os.symlink(os.path.abspath(model), target)
    open(target + ".completed", "a").close()  # datatrove's mark of a finished download
    url_filter = URLFilter()
    url_filter.download_data()  # unpacks the block lists into the asset cache, once
    unpacked = cached_assets_path(library_name="datatrove", namespace="filters", subfolder="url_filter")
    assets = os.path.join(os.path.dirname(sys.modules["datatrove"].__file__), "assets")
    os.makedirs(lists_dir, exist_ok=True)
    for name in ("domains", "urls"):
        shutil.copyfile(os.path.join(unpacked, name), os.path.join(lists_dir, name))
    for name in ("banned_words.txt", "banned_subwords.txt", "soft_banned_words.txt"):
        shutil.copyfile(os.path.join(assets, name), os.path.join(lists_dir, name))


def step_seconds(logging_dir: str, phase: str) -> dict:
    with open(os.path.join(logging_dir, "stats.json")) as f:
        stats = json.load(f)
    out = {}
    for step in stats:
        name, total = step.get("name", "?"), (step.get("time_stats") or {}).get("total", 0.0)
        out[f"{phase}/{name}"] = round(float(total), 4)
    return out


def sorted_urls(folder: str) -> list:
    """The sorted URLs of the documents in the JSONL files in ``folder``."""
    urls = []
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            urls += [json.loads(line)["metadata"]["url"] for line in f]
    return sorted(urls)


def url_digest(urls: list) -> str:
    return hashlib.sha1("\n".join(urls).encode()).hexdigest()


def run(source: str, out: str, limit: float, dedup: bool = False) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
        URLFilter,
    )
    from datatrove.pipeline.formatters import PIIFormatter
    from datatrove.pipeline.readers import JsonlReader, WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    base_out, pii_out = os.path.join(out, "base"), os.path.join(out, "corpus")

    def executor(name: str, pipeline: list, tasks: int = 1) -> tuple[str, object]:
        logs = os.path.join(out, f"logs-{name}")
        return name, LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=1, logging_dir=logs)

    executors = [
        executor("base", [
            WarcReader(source, glob_pattern="*.warc.gz"),
            URLFilter(),
            Trafilatura(favour_precision=True, timeout=limit),
            LanguageFilter(languages=["en"], language_threshold=0.65),
            GopherRepetitionFilter(),
            GopherQualityFilter(),
            C4QualityFilter(filter_no_terminal_punct=False),
            FineWebQualityFilter(),
            JsonlWriter(base_out, compression=None),
        ]),
    ]  # fmt: skip
    if dedup:
        from datatrove.pipeline.dedup import (
            MinhashConfig,
            MinhashDedupBuckets,
            MinhashDedupCluster,
            MinhashDedupFilter,
            MinhashDedupSignature,
        )
        from datatrove.utils.hashing import HashConfig

        config = MinhashConfig(hash_config=HashConfig(hash_fc="sha1", precision=64), num_buckets=14,
                               hashes_per_bucket=8, n_grams=5)  # fmt: skip
        sigs, buckets, remove = (os.path.join(out, "minhash", d) for d in ("signatures", "buckets", "remove_ids"))
        executors += [
            executor("signatures", [JsonlReader(base_out), MinhashDedupSignature(output_folder=sigs, config=config)]),
            executor("buckets", [MinhashDedupBuckets(input_folder=sigs, output_folder=buckets, config=config)],
                     tasks=config.num_buckets),
            executor("cluster", [MinhashDedupCluster(input_folder=buckets, output_folder=remove, config=config)]),
            executor("filter", [JsonlReader(base_out), MinhashDedupFilter(input_folder=remove), PIIFormatter(),
                                JsonlWriter(pii_out, compression=None)]),
        ]  # fmt: skip
    else:
        executors.append(
            executor("pii", [JsonlReader(base_out), PIIFormatter(), JsonlWriter(pii_out, compression=None)])
        )
    start = time.perf_counter()
    for _, ex in executors:
        ex.run()
    seconds = time.perf_counter() - start
    stages = {}
    for name, _ in executors:
        stages.update(step_seconds(os.path.join(out, f"logs-{name}"), name))
    with open(os.path.join(out, "logs-base", "stats.json")) as f:
        reader = json.load(f)[0]
    pages = int((reader.get("stats") or {}).get("documents", {}).get("total", 0))
    written, kept = sorted_urls(pii_out), sorted_urls(base_out)
    return {"pages": pages, "docs": len(written), "urls": url_digest(written), "survivors": written,
            "base_docs": len(kept), "base_urls": url_digest(kept), "seconds": seconds, "stages": stages}  # fmt: skip


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3])
        return 0
    print(json.dumps(run(sys.argv[2], sys.argv[3], float(sys.argv[4]), dedup=sys.argv[5:] == ["--dedup"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

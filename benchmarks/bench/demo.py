"""The demo job (examples/curate.py) as the rows run it: as a fresh process, in this process on any
executor, and as the plain pyarrow loop a user would write for the same per-file work."""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from curator_slurm import Pipeline, ShardSpec
from curator_slurm.backends.run import BaseExecutor

from .corpora import Corpus
from .harness import BenchError, run_child

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "curate.py"


#: The demo job's settings (examples/curate.py): the plain loop below must do exactly this work.
MIN_WORDS = 50
MAX_WORDS = 100_000  # WordCountFilter's default upper bound
MAX_SYMBOL_RATIO = 0.25
#: Whitespace as str.split() sees it (the filters' definition; pyarrow's \s alone is ASCII-only).
SPACE = r"\s\x0b\x1c-\x1f\x85\p{Z}"
#: The JSON block size the framework's reader uses (curator_slurm.stages.io.readers._JSON_BLOCK_SIZE);
#: the plain loop uses the same so that the comparison measures the framework, not a read option.
JSON_BLOCK_SIZE = 16 << 20


#: What every process of the demo job imports whatever the framework does: the floor of row 3.
BARE_IMPORTS = "import pyarrow.json, pyarrow._compute, pyarrow._parquet"


def curate_cmd(input_dir: Path, output_dir: Path, workers: int = 1) -> list[str]:
    return [
        sys.executable,
        str(EXAMPLE),
        "--input",
        str(input_dir),
        "--output",
        str(output_dir),
        "--workers",
        str(workers),
    ]


def run_curate(corpus: Corpus, output_dir: Path, workers: int) -> JobRun:
    """``examples/curate.py --workers N`` as a user runs it: a fresh process, timed from its start to its exit."""
    child = run_child(curate_cmd(corpus.path, output_dir, workers))
    summary = re.search(r"curate: (\d+) files written, (\d+) docs in, (\d+) docs out", child.stdout)
    if summary is None:
        raise BenchError(f"curate.py --workers {workers} printed no summary line:\n{child.stdout[-1000:]}")
    files, docs_in, docs_out = map(int, summary.groups())
    return JobRun(child.wall, docs_in, docs_out, files)


@functools.cache
def _load_example() -> Any:
    """examples/curate.py as a module, so the in-process rows run exactly the demo job's pipeline."""
    spec = importlib.util.spec_from_file_location("curator_bench_demo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def demo_pipeline(input_dir: str | Path, output_dir: Path) -> Pipeline:
    """The demo job of examples/curate.py with its default settings (one file per source task); ``input_dir``
    may be a URI (``s3://bucket/prefix``)."""
    return _load_example().build_pipeline(str(input_dir), str(output_dir), MIN_WORDS, 1)


@dataclass(frozen=True)
class JobRun:
    seconds: float
    docs_in: int
    docs_out: int
    files_out: int

    @property
    def docs_per_s(self) -> float:
        return self.docs_in / self.seconds


def run_demo_job(executor: BaseExecutor, corpus: Corpus, output_dir: Path) -> JobRun:
    """The demo job, unsharded, on ``executor``, timed from build to the last file written."""
    start = time.perf_counter()
    result = demo_pipeline(corpus.path, output_dir).run(executor, shard=ShardSpec.single())
    seconds = time.perf_counter() - start
    return JobRun(seconds, result.rows_in, result.rows_out, len(result.output_files))


def plain_loop(corpus: Corpus, output_dir: Path) -> JobRun:
    """What a user would write by hand for the demo job: per input file, read the JSONL, apply the same
    pyarrow.compute kernels the two filters use (word count kept as a column, as score_field does),
    write one snappy Parquet file. No framework, no temporary names, no fsync, no validation."""
    start = time.perf_counter()
    read_options = pj.ReadOptions(block_size=JSON_BLOCK_SIZE)
    docs_in = docs_out = 0
    for path in corpus.files:
        table = pj.read_json(str(path), read_options=read_options)
        docs_in += table.num_rows
        # WordCountFilter(min_words=50), score_field="word_count"
        trimmed = pc.utf8_trim_whitespace(pc.fill_null(table.column("text"), ""))
        words = pc.if_else(
            pc.equal(pc.utf8_length(trimmed), 0), 0, pc.list_value_length(pc.utf8_split_whitespace(trimmed))
        )
        keep = pc.and_(pc.and_(pc.is_valid(words), pc.greater_equal(words, MIN_WORDS)), pc.less_equal(words, MAX_WORDS))
        table = table.append_column("word_count", words).filter(keep)
        # SymbolRatioFilter(max_symbol_ratio=0.25)
        texts = pc.fill_null(table.column("text"), "")
        visible = pc.utf8_length(pc.replace_substring_regex(texts, f"[{SPACE}]+", ""))
        symbols = pc.utf8_length(pc.replace_substring_regex(texts, f"[\\p{{L}}\\p{{N}}{SPACE}]+", ""))
        ratio = pc.divide(pc.cast(symbols, pa.float64()), pc.cast(pc.max_element_wise(visible, 1), pa.float64()))
        table = table.filter(pc.and_(pc.is_valid(ratio), pc.less_equal(ratio, MAX_SYMBOL_RATIO)))
        pq.write_table(table, str(output_dir / (path.stem + ".parquet")), compression="snappy")
        docs_out += table.num_rows
    return JobRun(time.perf_counter() - start, docs_in, docs_out, len(corpus.files))

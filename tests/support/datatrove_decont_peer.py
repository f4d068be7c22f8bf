"""What datatrove's n-gram decontamination test downloads, given here: the HellaSwag validation rows it relies on, as
lighteval's ``leaderboard|hellaswag`` renders them; and its ``Document`` list run through the filter."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import Any

import pyarrow as pa

from curator_slurm.stages import NGramsDecontFilter, NGramsDecontIndexer
from curator_slurm.stages.filters.decont import HashConfig, NGramsDecontConfig
from curator_slurm.tasks import DocumentBatch

#: The rows of HellaSwag's validation split behind the upstream test's texts, each ``query`` as lighteval writes it
#: (``activity_label: ctx_a Ctx_b``) and ``text`` its gold ending with lighteval's leading space.
HELLASWAG = [
    {
        "task": "leaderboard|hellaswag|0",
        "query": "Clean and jerk: A lady walks to a barbell. She bends down and grabs the pole. The lady",
        "text": " stands and lifts the weight over her head.",
    },
    {
        "task": "leaderboard|hellaswag|0",
        "query": "Cheerleading: A group of cheerleaders run onto a stage before a cheering audience. They",
        "text": " get into formation, then begin dancing and flipping as male cheerleaders join them.",
    },
    {
        "task": "leaderboard|hellaswag|0",
        "query": "Cutting the grass: A man walks outside plugs his lawn mower in and gets ready to mow. He",
        "text": " starts mowing his lawn casually going over all the grass.",
    },
    {
        "task": "leaderboard|hellaswag|0",
        "query": "Cutting the grass: He is using commercial lawn mowing equipment. He",
        "text": " walks back and forth as he mows the grass.",
    },
]


@dataclass
class Document:
    """datatrove's ``Document``, as far as the test builds one."""

    text: str
    id: str
    metadata: dict[str, Any] = field(default_factory=dict)


def build_index(folder: str, config: NGramsDecontConfig) -> None:
    """datatrove's ``NGramsDecontIndexer(folder, lighteval_tasks="leaderboard|hellaswag", config=config).run()``."""
    NGramsDecontIndexer(folder, texts=HELLASWAG, config=config).run()


def run_filter(nfilter: NGramsDecontFilter, docs: list[Document]) -> list[Document]:
    """datatrove's ``nfilter(docs)``: the documents kept, in order."""
    table = pa.table({"text": [d.text for d in docs], "id": [d.id for d in docs]})
    nfilter.setup()
    out = nfilter.process(DocumentBatch(task_id="t", data=table, metadata={"files": ["in.jsonl"]}))
    kept = set(out.data.column("id").to_pylist())
    return [d for d in docs if d.id in kept]


def use_hash_configs(precision: tuple[int, ...] = (32, 64), hash_fc: tuple[str, ...] = ("xxhash",)) -> Callable:
    """datatrove's ``tests.utils.use_hash_configs``: the test run with each hash configuration."""

    def wrapper(f: Callable) -> Callable:
        @wraps(f)
        def inner(self: Any, *args: Any) -> None:
            for p, h in itertools.product(precision, hash_fc):
                self.setUp()
                f(self, *args, HashConfig(precision=p, hash_fc=h))  # type: ignore[arg-type]
                self.doCleanups()

        return inner

    return wrapper

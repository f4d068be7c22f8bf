"""How datatrove's own unit tests call a step, for their ports in tests/peers/datatrove: datatrove's steps take one
``Document`` (``step.filter(doc)``, ``step(doc)``) or a stream of them (``step.run(docs)``, counted in
``step.stats``). :func:`datatrove_step` gives a stage of this package those calls: the documents become a batch
(text, id, and each metadata key as a field), the stage's own ``decide``/``process`` decides, and the result goes
back into the documents (text rewritten, fields written into metadata)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from curator_slurm.stages import datatrove as ours
from curator_slurm.stages.datatrove import Document
from curator_slurm.tasks import DocumentBatch

__all__ = ["Document", "datatrove_step"]


@dataclass
class Stat:
    total: int = 0


def _batch(docs: list[Document], task_id: str) -> DocumentBatch:
    keys = sorted({k for d in docs for k in d.metadata})
    columns: dict[str, Any] = {"text": pa.array([d.text for d in docs], pa.string()), "id": [d.id for d in docs]}
    columns.update({k: [d.metadata.get(k) for d in docs] for k in keys})
    return DocumentBatch(task_id=task_id, data=pa.table(columns), metadata={"files": ["test.jsonl"]}, source_id=task_id)


def datatrove_step(stage_class: type) -> type:
    """``stage_class`` with datatrove's calls on documents (its own decisions in between)."""

    def _next_id(self: Any) -> str:
        # One batch per call: each gets its own lineage (a sampler draws per batch), counted per step.
        self.__dict__["_calls"] = self.__dict__.get("_calls", 0) + 1
        return f"doc-{self._calls}"

    def filter(self: Any, doc: Document) -> Any:
        batch = _batch([doc], self._next_id())
        decision = self.decide(self.texts(batch), batch)
        kept = bool(pa.array(decision.keep)[0].as_py()) if len(decision.keep) else False
        if decision.texts is not None and kept:
            doc.text = decision.texts[0].as_py()
        for name, values in decision.columns.items():
            doc.metadata[name] = values[0].as_py() if hasattr(values[0], "as_py") else values[0]
        reason = decision.reasons[0] if decision.reasons is not None else None
        return True if kept else (False, reason) if reason is not None else False

    def run(self: Any, data: Iterable[Document], rank: int = 0, world_size: int = 1) -> Iterator[Document]:
        docs = list(data)
        stats = self.__dict__.setdefault("stats", {"total": Stat(), "forwarded": Stat(), "dropped": Stat()})
        stats["total"].total += len(docs)
        out = self.process(_batch(docs, self._next_id())).data.to_pylist()
        stats["forwarded"].total += len(out)
        stats["dropped"].total += len(docs) - len(out)
        for row in out:
            meta = {k: v for k, v in row.items() if k not in ("text", "id")}
            yield Document(row["text"], row["id"], meta)

    def call(self: Any, doc: Document) -> Any:
        return filter(self, doc)

    def format(self: Any, text: str) -> str:
        return self.format_texts(pa.array([text], pa.string()))[0].as_py()

    methods: dict[str, Any] = {"_next_id": _next_id, "run": run, "__module__": stage_class.__module__}
    if not hasattr(stage_class, "format") and hasattr(stage_class, "format_texts"):  # PIIFormatter: whole columns
        methods["format"] = format
    if issubclass(stage_class, ours.DatatroveFilter):
        methods.update(filter=filter, __call__=call)
    return type(stage_class.__name__, (stage_class,), methods)

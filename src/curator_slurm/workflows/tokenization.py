"""From documents to Megatron training files, as a two-phase workflow: ``tokenize`` (a pair per source task) and
``merge`` (the pairs, sorted by name, concatenated into parts of about ``merge_tokens`` tokens; task ``k`` writes
the parts ``g % merge_tasks == k``). Order and layout: docs/reference.md; design: docs/design.md, Tokenization."""

from __future__ import annotations

import os
from typing import Any, BinaryIO

from curator_slurm import fs
from curator_slurm.errors import InputError
from curator_slurm.runs.layout import DEFAULT_WORK_DIR_NAME
from curator_slurm.runs.upstream import Upstream, files_of
from curator_slurm.stages.base import ProcessingStage
from curator_slurm.stages.io.megatron import MegatronTokenizerWriter
from curator_slurm.stages.io.megatron_format import merge_pairs, pair_tokens, read_header
from curator_slurm.stages.io.writers import BaseWriter, atomic_write, output_sync_deferred
from curator_slurm.tasks import EmptyTask, FileGroupTask, content_id
from curator_slurm.workflows.workflow import Phase, Workflow, phase_upstream


def done_pairs(tokenize: Upstream) -> list[str]:
    """The ``.bin``/``.idx`` prefixes that the phase ``tokenize``'s done records list, sorted by file name."""
    prefixes = {path[: -len(".idx")] for path in files_of(tokenize, suffix=".idx")}
    return sorted(prefixes, key=lambda p: (os.path.basename(p), p))


def plan_parts(prefixes: list[str], merge_tokens: int | None) -> list[list[str]]:
    """Consecutive runs of ``prefixes``, each closed once it holds ``merge_tokens`` tokens or more (one run of
    all of them when ``merge_tokens`` is None); from the ``.bin`` sizes only."""
    if not prefixes:
        return []
    if merge_tokens is None:
        return [list(prefixes)]
    dtype = read_header(prefixes[0] + ".idx").dtype
    parts: list[list[str]] = [[]]
    tokens = 0
    for prefix in prefixes:
        if tokens >= merge_tokens:
            parts.append([])
            tokens = 0
        parts[-1].append(prefix)
        tokens += pair_tokens(prefix, dtype)
    return parts


class MergeSource(ProcessingStage[EmptyTask, FileGroupTask]):
    """``tasks`` source tasks for the merge phase, with ids known before the tokenize phase has run."""

    name = "megatron_merge_source"

    def __init__(self, tokenize: Upstream, tasks: int, workflow: str) -> None:
        if tasks < 1:
            raise ValueError(f"merge_tasks={tasks} must be >= 1")
        self.tokenize = tokenize
        self.tasks = tasks
        self.workflow = workflow

    def params(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "workflow": self.workflow}  # not where the run directory is mounted

    def upstreams(self) -> list[Any]:
        return [self.tokenize]

    def outputs(self) -> tuple[list[str], list[str] | None]:
        return ["data"], []

    def process(self, task: EmptyTask) -> list[FileGroupTask]:
        return [
            FileGroupTask(
                task_id=content_id(self.workflow, f"merge={k}/{self.tasks}"),
                dataset_name=self.workflow,
                data=[],
                metadata={"slot": k, "slots": self.tasks, "upstream": self.tokenize.as_json(), "bytes": 1},
            )
            for k in range(self.tasks)
        ]


class MegatronMerge(BaseWriter):
    """Write this merge task's parts (see the module docstring) as ``<prefix>_<part:05d>.bin``/``.idx``."""

    name = "megatron_merge"
    extension = ".bin"

    def __init__(self, path: str | os.PathLike, merge_tokens: int | None = None, prefix: str = "part") -> None:
        super().__init__(path)
        if merge_tokens is not None and merge_tokens < 1:
            raise ValueError(f"merge_tokens={merge_tokens} must be >= 1 (or None: one file)")
        if not prefix or os.sep in prefix:
            raise ValueError(f"prefix={prefix!r} must be a plain file name")
        self.merge_tokens = merge_tokens
        self.prefix = prefix

    def inputs(self) -> tuple[list[str], list[str]]:
        return ["data"], []

    def process(self, task: FileGroupTask) -> FileGroupTask:  # type: ignore[override]
        slot, slots = int(task.metadata["slot"]), int(task.metadata["slots"])
        prefixes = done_pairs(Upstream.of(task.metadata["upstream"]))
        missing = [p for p in prefixes if not (fs.exists(p + ".bin") and fs.exists(p + ".idx"))]
        if missing:
            raise InputError(
                f"{missing[0]}.bin/.idx: recorded done by the tokenize phase but not there ({len(missing)} pair(s) "
                "missing); were they moved? Re-run the tokenize phase into a new work directory"
            )
        parts = plan_parts(prefixes, self.merge_tokens)
        fs.makedirs(self.path)
        sync = not (self.is_sink_stage and output_sync_deferred())

        sizes: dict[str, int] = {}

        def write(path: str, fill: Any) -> None:
            sizes[path] = atomic_write(path, fill, sync=sync)

        written: list[str] = []
        documents = tokens = 0
        for g in range(slot, len(parts), slots):
            out = fs.join(self.path, f"{self.prefix}_{g:05d}")
            merge_pairs(parts[g], write, out)
            header = read_header(out + ".idx")
            documents += header.documents - 1
            tokens += sizes[out + ".bin"] // header.dtype.itemsize
            written += [out + ".bin", out + ".idx"]
        return FileGroupTask(
            task_id=task.task_id,
            dataset_name=task.dataset_name,
            data=written,
            metadata={
                "rows": documents,
                "tokens": tokens,
                "parts": len(written) // 2,
                "sizes": [sizes[p] for p in written],
            },
            stage_perf=task.stage_perf,
            source_id=task.source_id,
        )

    def existing_outputs(self) -> list[str]:
        return sorted(super().existing_outputs() + fs.finished_files(self.path, ".idx"))

    def write_table(self, table: Any, f: BinaryIO) -> None:
        raise TypeError("MegatronMerge merges token files; it writes no table")


def tokenization_phases(
    reader: ProcessingStage,
    writer: MegatronTokenizerWriter,
    output: str | os.PathLike,
    work_dir: str | os.PathLike,
    merge_tokens: int | None = None,
    merge_tasks: int = 1,
    prefix: str = "part",
    name: str = "megatron-tokenize",
) -> list[Phase]:
    """The phases ``tokenize`` and ``merge`` (see the module docstring), for a workflow whose work directory is
    ``work_dir``: appended to another workflow's phases, they tokenize what its last phase wrote when ``reader``
    reads that phase's recorded outputs (:class:`~curator_slurm.workflows.chain.PhaseOutputsReader`)."""
    from curator_slurm.pipeline import Pipeline

    output = fs.absolute(output)
    if fs.absolute(writer.path) == output:
        raise ValueError(f"the writer's path and output are both {output}: give the per-task pairs their own")
    merge = (
        Pipeline(f"{name}-merge")
        .add_stage(MergeSource(phase_upstream(work_dir, "tokenize"), merge_tasks, name))
        .add_stage(MegatronMerge(output, merge_tokens, prefix))
    )
    return [
        Phase("tokenize", Pipeline(f"{name}-tokenize").add_stage(reader).add_stage(writer)),
        Phase("merge", merge, max_shards=merge_tasks),
    ]


class MegatronTokenization(Workflow):
    """Tokenize ``reader``'s documents with ``writer``, then merge the pairs into parts of about ``merge_tokens``
    tokens. The same two phases, for appending to another workflow: :func:`tokenization_phases`.

    Args:
        reader: the reader of the documents.
        writer: the tokenizer writer (one pair per source task in ``writer.path``).
        output: the directory of the merged parts.
        merge_tokens: about how many tokens a part holds (None: one part).
        merge_tasks: the source tasks of the merge phase.
        prefix: the parts' names start with it (``<prefix>_00000.bin``).
        work_dir: the phases' run directories (default ``<output>/.curator-work``).
        name: the workflow's name.
    """

    def __init__(
        self,
        reader: ProcessingStage,
        writer: MegatronTokenizerWriter,
        output: str | os.PathLike,
        merge_tokens: int | None = None,
        merge_tasks: int = 1,
        prefix: str = "part",
        work_dir: str | os.PathLike | None = None,
        name: str = "megatron-tokenize",
    ) -> None:
        output = fs.absolute(output)
        work = fs.absolute(work_dir) if work_dir is not None else fs.join(output, DEFAULT_WORK_DIR_NAME)
        phases = tokenization_phases(reader, writer, output, work, merge_tokens, merge_tasks, prefix, name)
        super().__init__(name, work, phases)

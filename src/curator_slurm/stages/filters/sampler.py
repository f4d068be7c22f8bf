"""datatrove's ``SamplerFilter``: keep each document with probability ``rate``."""

from __future__ import annotations

import pyarrow as pa

from curator_slurm.stages.filters.decide import DatatroveFilter, Decision, batch_seed
from curator_slurm.stages.io.writers import BaseWriter
from curator_slurm.tasks import DocumentBatch


class SamplerFilter(DatatroveFilter):
    """datatrove's ``SamplerFilter``: a document is kept when a uniform draw in [0, 1) is below ``rate``
    (the rate to keep). datatrove draws from one generator per worker seeded with ``seed`` (``None``: a
    random one); here each batch draws from a generator seeded with ``seed`` and the batch's lineage
    (:func:`~.base.batch_seed`), so a re-run, any shard and any executor keep the same documents. The
    removed documents have no reason (datatrove gives none): their ``filter_reason`` is null.

    Args:
        rate: the share of documents kept, 0 to 1.
        seed: the seed of the draws (None: 0).
        exclusion_writer: a writer for the removed documents (None: none).
        text_field: the field whose characters the funnel counts as removed.
    """

    name = "sampler_filter"

    def __init__(
        self,
        rate: float | None = 0.5,
        seed: int | None = None,
        exclusion_writer: BaseWriter | None = None,
        text_field: str = "text",
    ) -> None:
        super().__init__(exclusion_writer, text_field)
        if rate is None or not 0.0 <= float(rate) <= 1.0:
            raise ValueError(f"SamplerFilter(rate={rate!r}): the rate to keep is a fraction between 0 and 1")
        self.rate = float(rate)
        self.seed = seed

    def decide(self, texts: pa.Array, task: DocumentBatch) -> Decision:
        keep = batch_seed(self.seed, task).uniform(size=len(texts)) < self.rate
        return Decision(keep, [None] * len(texts))

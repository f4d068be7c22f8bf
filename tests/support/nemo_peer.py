"""How NeMo Curator's own unit tests build and read a batch, for their ports in tests/peers/nemo: NeMo's batch holds
a pandas DataFrame that tests build, change and read; here a batch holds Arrow. :class:`DocumentBatch` is NeMo's
batch as its tests see it (a DataFrame, a dataset name, a fixed task id: NeMo assigns ids in its executor), and
:func:`nemo_stage` runs a real stage of this package on it, through ``curator_slurm.DocumentBatch`` (built from
the DataFrame) and back (``to_pandas()``): the stage's own code decides, the adapter only converts."""

from __future__ import annotations

from typing import Any

import pandas as pd

from curator_slurm import tasks
from curator_slurm.nemo import Filter as _Filter
from curator_slurm.nemo import Modify as _Modify
from curator_slurm.nemo import Score as _Score
from curator_slurm.nemo import ScoreFilter as _ScoreFilter

#: The id every batch of a ported test has (NeMo's tests compare ids of batches built apart: NeMo's are "" then).
TASK_ID = "nemo-test"


class DocumentBatch:
    """NeMo's ``DocumentBatch(data=df, dataset_name=...)`` as its tests use it."""

    def __init__(self, data: pd.DataFrame, dataset_name: str = "", task_id: str = TASK_ID) -> None:
        self.data = data
        self.dataset_name = dataset_name
        self.task_id = task_id

    def to_pandas(self) -> pd.DataFrame:
        return self.data

    def ours(self) -> tasks.DocumentBatch:
        return tasks.DocumentBatch(task_id=self.task_id, dataset_name=self.dataset_name, data=self.data)

    @classmethod
    def of(cls, batch: tasks.DocumentBatch) -> DocumentBatch:
        return cls(batch.to_pandas(), batch.dataset_name, batch.task_id)


def nemo_stage(stage_class: type) -> type:
    """``stage_class`` with a ``process`` that takes and gives :class:`DocumentBatch` (the stage's own
    ``process`` in between)."""

    def process(self: Any, batch: DocumentBatch) -> DocumentBatch:
        return DocumentBatch.of(stage_class.process(self, batch.ours()))

    return type(stage_class.__name__, (stage_class,), {"process": process, "__module__": stage_class.__module__})


ScoreFilter = nemo_stage(_ScoreFilter)
Score = nemo_stage(_Score)
Filter = nemo_stage(_Filter)
Modify = nemo_stage(_Modify)

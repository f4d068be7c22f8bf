"""Small fastText models trained in the test (milliseconds), each in a fresh interpreter: fastText 0.9.2 reads
memory it did not initialise, so a second training in one process can differ or give "Encountered NaN"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_TRAIN = """
import sys, fasttext
model = fasttext.train_supervised(
    sys.argv[1], epoch=20, lr=0.2, dim=16, minn=2, maxn=4, bucket=10_000, thread=1, seed=1, verbose=0
)
model.save_model(sys.argv[2])
"""


def train_model(path: Path, lines: list[str]) -> str:
    """A fastText model of ``lines`` (``__label__x text``) saved at ``path``; a NaN is retried in a new process."""
    data = path.with_suffix(".txt")
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for attempt in range(10):
        done = subprocess.run([sys.executable, "-c", _TRAIN, str(data), str(path)], capture_output=True, text=True)
        if done.returncode == 0:
            return str(path)
        if "NaN" not in done.stderr or attempt == 9:
            raise RuntimeError(f"training a test model failed: {done.stderr[-2000:]}")
    raise AssertionError("unreachable")

from __future__ import annotations

from pathlib import Path

import pytest

from curator_slurm.sample import make_corpus


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small JSONL corpus: 12 files of 60 documents, about a fifth too short for the demo filter.
    Session-scoped and read-only: tests that damage inputs make their own copy."""
    root = tmp_path_factory.mktemp("corpus")
    make_corpus(str(root), files=12, docs_per_file=60, seed=1)
    return root

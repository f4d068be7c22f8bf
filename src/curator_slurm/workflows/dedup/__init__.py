"""Deduplication: exact (hash of the normalised text) and fuzzy (MinHash + LSH + connected components).

The submodules import numpy; this package imports nothing, so ``import curator_slurm`` stays light."""

"""What a run leaves on disk, none of it Slurm-specific: the run directory and its ledger (which source
task is done or failed), the manifest a submission plans once, how source tasks are split into shards,
its funnel and summary, and the run options. It imports nothing of ``backends/``, ``slurm/``, ``workflow``,
``workflows/dedup/`` or the CLI (``tests/test_layers.py``)."""

"""What a run leaves on disk, none of it Slurm-specific: the run directory and its ledger, the manifest a submission
plans once, the split of source tasks into shards, the funnel and summary, and the run options. Imports nothing
of ``backends/``, ``slurm/``, the workflows or the CLI."""

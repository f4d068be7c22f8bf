"""Helpers the tests share: processes, executors, Slurm and S3 tools, fixtures of real files."""

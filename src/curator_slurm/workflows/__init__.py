"""Workflows: global steps (deduplication, tokenization, chained phases) as phases over arrays."""

"""The package's version, read by pyproject.toml (hatch) and recorded in every run's fingerprint."""

__version__ = "0.2.0"

"""The ``curator-slurm`` command: a thin shell (parse, call a library function, print) over the package."""

from curator_slurm.cli.main import EXAMPLES, main
from curator_slurm.cli.parser import build_parser

__all__ = ["EXAMPLES", "build_parser", "main"]

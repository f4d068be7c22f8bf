"""The ``curator-slurm`` command: a thin shell (parse, call a library function, print) over the package."""

from curator_slurm.cli.commands import COMMANDS, EXAMPLES, main
from curator_slurm.cli.parser import build_parser

__all__ = ["COMMANDS", "EXAMPLES", "build_parser", "main"]

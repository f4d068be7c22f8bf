"""``python -m curator_slurm.cli``: the ``curator-slurm`` command."""

import sys

from curator_slurm.cli.commands import main

sys.exit(main())

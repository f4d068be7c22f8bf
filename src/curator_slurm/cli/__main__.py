"""``python -m curator_slurm.cli``: the ``curator-slurm`` command."""

import sys

from curator_slurm.cli.main import main

sys.exit(main())

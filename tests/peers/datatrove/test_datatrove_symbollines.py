# ruff: noqa: E501 - upstream's lines, kept as they are
# Ported from datatrove (huggingface/datatrove), tests/pipeline/filters/test_symbollines.py at v0.10.0, commit
# 7024aecca2f9ffb7b7cf0d02c0c823b8b24cf664; Apache License 2.0.
"""datatrove's own tests of SymbolLinesFormatter, run against this package.

Changed from upstream, and nothing else: the imports (each step is this package's stage with datatrove's calls on
documents, support.datatrove_peer); upstream's ``require_*`` marks check this package's optional packages;
tests that cannot pass here are marked xfail (strict) with the reason, also listed in docs/catalogue.md.
"""

import unittest

from curator_slurm.stages import datatrove as ours
from support.datatrove_peer import datatrove_step

SymbolLinesFormatter = datatrove_step(ours.SymbolLinesFormatter)


INPUT_TEXT = """-
-
-
>> Harold Brantley is a 6-2, 283-pound Defensive Tackle from Hershey, PA. He is ranked No. 1385 in the country by 247Sports.


>> Brantley is the No. 45 recruit in Pennsylvania (PA) and is the No. 89 Defensive Tackle in the nation.

>> Brantley has a 247Sports rating of 80, making him a 3-star prospect.
|
|
|
hello ehehe -
|
- oi mate
|

bye"""

FORMATTED_TEXT = """>> Harold Brantley is a 6-2, 283-pound Defensive Tackle from Hershey, PA. He is ranked No. 1385 in the country by 247Sports.


>> Brantley is the No. 45 recruit in Pennsylvania (PA) and is the No. 89 Defensive Tackle in the nation.

>> Brantley has a 247Sports rating of 80, making him a 3-star prospect.
hello ehehe -
- oi mate

bye"""


class TestSymbolLinesRemover(unittest.TestCase):
    def test_symbol_lines_remover(self):
        formatter = SymbolLinesFormatter()
        self.assertEqual(formatter.format(INPUT_TEXT), FORMATTED_TEXT)

#!/usr/bin/env bash
# Builds the venv that the bench's datatrove rows (d1-d7, w4, fw1, fw2) run datatrove in:
#   bash scripts/datatrove-venv.sh [DIR]      (default /work/venvs/datatrove)
# then `export CURATOR_DATATROVE_PYTHON=DIR/bin/python`. datatrove 0.10 pins trafilatura<1.12; the bench compares
# both sides on one trafilatura release, so TRAFILATURA (default 2.3.1, as `make venv` installs; 1.11.0 for
# datatrove's own) goes in, over that pin when it is 2.x, and pip reports the broken pin: that is the point. The
# rest is what datatrove's WarcReader, Trafilatura, LanguageFilter, URLFilter, Gopher filters, MinHash stages and
# JsonlWriter import (lxml_html_clean too: trafilatura 1.x and 2.x import lxml.html.clean through jusText).
# Re-running it on an existing venv only re-installs.
set -euo pipefail
DIR=${1:-/work/venvs/datatrove}
PYTHON=${PYTHON:-python3.11}
TRAFILATURA=${TRAFILATURA:-2.3.1}
if [ ! -x "$DIR/bin/python" ]; then
    "$PYTHON" -m venv "$DIR"
fi
"$DIR/bin/python" -m pip install --quiet --upgrade pip
"$DIR/bin/python" -m pip install --quiet 'datatrove[processing]==0.10.1'
# Our trafilatura release over datatrove's pin: pip warns about the pin and exits 0; the bench checks the release.
"$DIR/bin/python" -m pip install --quiet "trafilatura==$TRAFILATURA" lxml_html_clean warcio faust-cchardet \
    python-magic orjson spacy fasttext-numpy2-wheel tldextract aiohttp xxhash
"$DIR/bin/python" - <<'PY'
import importlib.metadata as m
import datatrove.pipeline.dedup  # noqa: F401  (the MinHash stages import)
from datatrove.pipeline.extractors import Trafilatura  # noqa: F401
print("datatrove", m.version("datatrove"), "trafilatura", m.version("trafilatura"))
PY
echo "export CURATOR_DATATROVE_PYTHON=$DIR/bin/python"

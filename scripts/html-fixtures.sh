#!/usr/bin/env bash
# Install the Debian packages whose real HTML the web tests build their WARC files from, and print the
# directories that hold it (one per line, "name<TAB>directory"). Idempotent: packages already installed are
# not installed again. Needs root (apt-get); CI runs it from .ci/run before the tests.
#   python3.11-doc   the Python documentation (English, large pages with code)
#   apache2-doc      Apache's manual, in many languages (de, es, fr, ja, ko, pt-br, ru, tr, zh-cn, ...)
#   debian-handbook  the Debian Administrator's Handbook (several languages)
set -euo pipefail

packages=(python3.11-doc apache2-doc debian-handbook)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Where each package puts its HTML (the tests find it through the same directories: tests/support/webfixtures.py).
dirs=(
    "python3.11-doc	/usr/share/doc/python3.11/html"
    "apache2-doc	/usr/share/doc/apache2-doc/manual"
    "debian-handbook	/usr/share/doc/debian-handbook/html"
)
for entry in "${dirs[@]}"; do
    dir=${entry#*	}
    if [[ ! -d $dir ]]; then
        echo "html-fixtures: ${entry%%	*} is installed but $dir is missing" >&2
        exit 1
    fi
    echo "$entry"
done

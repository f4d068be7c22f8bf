#!/usr/bin/env bash
# Install Debian's libmagic1, which the `code` extra's comment-parser loads (through python-magic) to tell a
# file's language for NeMo's code filters. Idempotent: nothing is installed when the library is there already.
# Needs root (apt-get); CI runs it from .ci/run before the tests.
set -euo pipefail

if ! ldconfig -p | grep -q 'libmagic\.so\.1'; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends libmagic1 >/dev/null
fi
ldconfig -p | grep -m1 'libmagic\.so\.1'

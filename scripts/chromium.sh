#!/usr/bin/env bash
# Install Debian's headless-capable Chromium, which the report tests render curator-slurm's HTML report in
# (tests/support/browser.py), and print its path. Idempotent: nothing is installed when it is there already.
# Needs root (apt-get); CI runs it from .ci/run before the tests.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
command -v chromium

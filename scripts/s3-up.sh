#!/usr/bin/env bash
# Start (or verify) a real S3 server on loopback for the tests and CI: moto's standalone server
# (moto[server] from PyPI, installed into the project's venv by `make venv`), in memory.
#
# Records its pid in $STATE_DIR/pids/moto.pid and its endpoint in $STATE_DIR/endpoint; only that pid is
# ever stopped (scripts/s3-down.sh). Idempotent: when the recorded server answers, prints its endpoint.
#
# Usage: s3-up.sh
#
# Environment:
#   CURATOR_S3_STATE   state dir (default /var/tmp/curator-s3)
#   CURATOR_S3_PORT    port on 127.0.0.1 (default 9753)
#   CURATOR_S3_PYTHON  the Python that has moto[server] (default .venv/bin/python of this checkout)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$SCRIPT_DIR")"
STATE_DIR="${CURATOR_S3_STATE:-/var/tmp/curator-s3}"
PORT="${CURATOR_S3_PORT:-9753}"
PY="${CURATOR_S3_PYTHON:-$REPO/.venv/bin/python}"
PID_FILE="$STATE_DIR/pids/moto.pid"
ENDPOINT="http://127.0.0.1:$PORT"

log() { echo "s3-up: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$PORT" =~ ^[0-9]+$ ]] || die "CURATOR_S3_PORT must be a port number (got '$PORT')"
[[ -x "$PY" ]] || die "$PY not found: run 'make venv' first (it installs moto[server]), or set CURATOR_S3_PYTHON"
"$PY" -c "import moto.server" 2>/dev/null || die "$PY has no moto[server]: run 'make venv' (dev extra)"

answers() { "$PY" - "$1" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=2).read()
except Exception:
    sys.exit(1)
PY
}

mkdir -p "$STATE_DIR/pids" "$STATE_DIR/log"
if [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null && answers "$ENDPOINT"; then
    log "already running: pid $(cat "$PID_FILE") endpoint=$ENDPOINT"
    echo "$ENDPOINT"
    exit 0
fi

setsid "$PY" -m moto.server -H 127.0.0.1 -p "$PORT" >"$STATE_DIR/log/moto.log" 2>&1 < /dev/null &
echo $! >"$PID_FILE"
for _ in $(seq 1 100); do
    if answers "$ENDPOINT"; then
        echo "$ENDPOINT" >"$STATE_DIR/endpoint"
        log "started: pid $(cat "$PID_FILE") endpoint=$ENDPOINT state_dir=$STATE_DIR"
        echo "$ENDPOINT"
        exit 0
    fi
    kill -0 "$(cat "$PID_FILE")" 2>/dev/null || { tail -20 "$STATE_DIR/log/moto.log" >&2; die "moto exited"; }
    sleep 0.2
done
die "moto did not answer on $ENDPOINT within 20 s (log: $STATE_DIR/log/moto.log)"

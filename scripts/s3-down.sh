#!/usr/bin/env bash
# Stop the S3 server that scripts/s3-up.sh started: only its recorded pid, and only if that pid is still a
# moto server (TERM, wait, then KILL). Idempotent.
#
# Environment:
#   CURATOR_S3_STATE  state dir (default /var/tmp/curator-s3)
set -euo pipefail

STATE_DIR="${CURATOR_S3_STATE:-/var/tmp/curator-s3}"
PID_FILE="$STATE_DIR/pids/moto.pid"

[[ -f "$PID_FILE" ]] || { echo "s3-down: nothing recorded in $PID_FILE; nothing to stop" >&2; exit 0; }
pid="$(cat "$PID_FILE")"
if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "moto.server"; then
    kill -TERM "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    echo "s3-down: stopped pid $pid" >&2
else
    echo "s3-down: pid $pid is not a running moto server; nothing to stop" >&2
fi
rm -f "$PID_FILE" "$STATE_DIR/endpoint"

#!/usr/bin/env bash
# Stop the daemons that scripts/slurm-up.sh started.
#
# Only pids recorded in $STATE_DIR/pids/<name>.pid are signalled (TERM, wait,
# then KILL), and only if that pid still is the named daemon; nothing is ever
# killed by name. Running job steps (slurmstepd) are left alone. Idempotent:
# succeeds when nothing runs.
#
# Usage: slurm-down.sh [slurmd|slurmctld|munged ...]   (default: all three)
#
# Environment:
#   CURATOR_SLURM_STATE  state dir (default /var/tmp/curator-slurm)
#   CURATOR_SLURM_STOP_TIMEOUT  seconds between TERM and KILL (default 30)
set -euo pipefail

STATE_DIR="${CURATOR_SLURM_STATE:-/var/tmp/curator-slurm}"
PID_DIR="$STATE_DIR/pids"
STOP_TIMEOUT="${CURATOR_SLURM_STOP_TIMEOUT:-30}"

log() { echo "slurm-down: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$STOP_TIMEOUT" =~ ^[0-9]+$ ]] || die "CURATOR_SLURM_STOP_TIMEOUT must be an integer"

daemons=("$@")
# slurmd first so it does not log errors about a vanished controller.
((${#daemons[@]})) || daemons=(slurmd slurmctld munged)
for name in "${daemons[@]}"; do
    case "$name" in
        slurmd|slurmctld|munged) ;;
        -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown daemon '$name' (expected slurmd, slurmctld or munged)" ;;
    esac
done

[[ -d "$PID_DIR" ]] || { log "nothing recorded in $PID_DIR; nothing to stop"; exit 0; }

# Share slurm-up.sh's lock, unless slurm-up.sh itself called us (it holds it).
if [[ -z "${CURATOR_SLURM_LOCK_HELD:-}" ]]; then
    exec 9>"$STATE_DIR/up.lock"
    flock -w 180 9 || die "timed out waiting for $STATE_DIR/up.lock"
fi

# True while pid $1 exists, is not a zombie and still runs command $2.
is_daemon() {
    local comm state
    comm="$(cat "/proc/$1/comm" 2>/dev/null)" || return 1
    [[ "$comm" == "$2" ]] || return 1
    state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
    [[ "$state" != Z ]]
}

# Poll up to $3 seconds for pid $1 (daemon $2) to go away.
wait_gone() {
    local end=$((SECONDS + $3))
    while is_daemon "$1" "$2"; do
        ((SECONDS < end)) || return 1
        sleep 0.2
    done
}

stop_one() {
    local name="$1" file="$PID_DIR/$1.pid" pid
    [[ -f "$file" ]] || { log "$name: not recorded, skipping"; return 0; }
    pid="$(<"$file")"
    if ! [[ "$pid" =~ ^[0-9]+$ ]] || ! is_daemon "$pid" "$name"; then
        # Dead, or the pid now belongs to some other process: do not touch it.
        log "$name: recorded pid '$pid' is not running $name any more; removing stale record"
        rm -f "$file"
        return 0
    fi
    log "$name: sending TERM to pid $pid"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" "$name" "$STOP_TIMEOUT"; then
        log "$name: pid $pid still alive after ${STOP_TIMEOUT}s; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone "$pid" "$name" 10 || die "$name: pid $pid survived SIGKILL"
    fi
    rm -f "$file"
    log "$name: stopped (pid $pid)"
}

for name in "${daemons[@]}"; do
    stop_one "$name"
done

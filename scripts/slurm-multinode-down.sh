#!/usr/bin/env bash
# Stop the multi-node test cluster that scripts/slurm-multinode-up.sh started, and undo its setup.
#
# Only pids recorded in <state dir>/pids/ are signalled (TERM, wait, then KILL), and only while that
# pid still runs the recorded daemon with this cluster's config file; nothing is killed by name, and
# the single-node cluster of slurm-up.sh (and munge) is never touched. Then, unless --daemons-only:
# the nodes' veth links, network namespaces, UTS namespace mounts, the bridge and the /etc/hosts
# block are removed. Job steps still running in a node are left alone (a namespace lives on while a
# process is in it). Idempotent: succeeds when nothing runs.
#
# Usage: slurm-multinode-down.sh [--daemons-only]
#
# Environment:
#   CURATOR_SLURM_MN_STATE       state dir (default /var/tmp/curator-slurm-mn)
#   CURATOR_SLURM_STOP_TIMEOUT   seconds between TERM and KILL (default 30)
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

STATE_DIR="${CURATOR_SLURM_MN_STATE:-/var/tmp/curator-slurm-mn}"
CONF="$STATE_DIR/slurm.conf"
PID_DIR="$STATE_DIR/pids"
NS_DIR="$STATE_DIR/ns"
BRIDGE="cmnbr0"
STOP_TIMEOUT="${CURATOR_SLURM_STOP_TIMEOUT:-30}"
HOSTS_BEGIN="# >>> curator-slurm multinode ($STATE_DIR) >>>"
HOSTS_END="# <<< curator-slurm multinode ($STATE_DIR) <<<"

log() { echo "slurm-multinode-down: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

daemons_only=0
case "${1:-}" in
    "") ;;
    --daemons-only) daemons_only=1 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument: $1 (expected --daemons-only)" ;;
esac
[[ "$STOP_TIMEOUT" =~ ^[0-9]+$ ]] || die "CURATOR_SLURM_STOP_TIMEOUT must be an integer"
[[ -d "$STATE_DIR" ]] || { log "nothing recorded in $STATE_DIR; nothing to stop"; exit 0; }
[[ "$(id -u)" == 0 ]] || die "must run as root"

if [[ -z "${CURATOR_SLURM_MN_LOCK_HELD:-}" ]]; then
    exec 9>"$STATE_DIR/up.lock"
    flock -w 180 9 || die "timed out waiting for $STATE_DIR/up.lock"
fi

# True while pid $1 runs daemon $2 with our config (not a zombie, not a reused pid).
is_ours() {
    local comm state
    comm="$(cat "/proc/$1/comm" 2>/dev/null)" || return 1
    [[ "$comm" == "$2" ]] || return 1
    state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
    [[ "$state" != Z ]] || return 1
    [[ "$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" == *" -f $CONF "* ]]
}

wait_gone() {
    local end=$((SECONDS + $3))
    while is_ours "$1" "$2"; do
        ((SECONDS < end)) || return 1
        sleep 0.2
    done
}

stop_one() {
    local file="$1" name pid daemon
    name="$(basename "$file" .pid)" daemon="${name%%-*}"
    pid="$(<"$file")"
    if ! [[ "$pid" =~ ^[0-9]+$ ]] || ! is_ours "$pid" "$daemon"; then
        log "$name: recorded pid '$pid' is not running our $daemon any more; removing stale record"
        rm -f "$file"
        return 0
    fi
    log "$name: sending TERM to pid $pid"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" "$daemon" "$STOP_TIMEOUT"; then
        log "$name: pid $pid still alive after ${STOP_TIMEOUT}s; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone "$pid" "$daemon" 10 || die "$name: pid $pid survived SIGKILL"
    fi
    rm -f "$file"
    log "$name: stopped (pid $pid)"
}

# The slurmds first, so that they do not log errors about a vanished controller.
shopt -s nullglob
for file in "$PID_DIR"/slurmd-*.pid; do stop_one "$file"; done
for file in "$PID_DIR"/slurmctld.pid; do stop_one "$file"; done
((daemons_only)) && exit 0

for uts in "$NS_DIR"/uts-*; do
    umount "$uts" 2>/dev/null || true
    rm -f "$uts"
done
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^curator-cnode[0-9]*$' || true); do
    ip -n "$ns" link del eth0 2>/dev/null || true  # also removes its peer on the bridge
    ip netns del "$ns" && log "removed network namespace $ns"
done
if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link del "$BRIDGE" && log "removed bridge $BRIDGE"
fi
if grep -qxF "$HOSTS_BEGIN" /etc/hosts; then
    tmp="$(mktemp)"
    awk -v b="$HOSTS_BEGIN" -v e="$HOSTS_END" '$0 == b {skip = 1} !skip {print} $0 == e {skip = 0}' /etc/hosts >"$tmp"
    cat "$tmp" >/etc/hosts
    rm -f "$tmp"
    log "removed the node names from /etc/hosts"
fi

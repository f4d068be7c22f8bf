#!/usr/bin/env bash
# Bring up (or verify) a single-node Slurm cluster for tests and CI.
#
# Runs munged, slurmctld and slurmd by hand (no systemd, no cgroups), writes
# /etc/slurm/slurm.conf so the client tools need no SLURM_CONF, and records
# every daemon it starts in $STATE_DIR/pids/<name>.pid. Only those recorded
# pids are ever stopped (see slurm-down.sh); nothing is killed by name.
#
# Idempotent: when the cluster already runs with the wanted config it only
# prints the summary line. Must run as root.
#
# Usage: slurm-up.sh [--max-array-size N] [--cpus N]
#
# Environment:
#   CURATOR_SLURM_STATE           state dir (default /var/tmp/curator-slurm)
#   CURATOR_SLURM_MAX_ARRAY_SIZE  default for --max-array-size (default 1001)
#   CURATOR_SLURM_CPUS            default for --cpus (default: real CPU count)
#   CURATOR_SLURM_WAIT            seconds to wait for the node (default 60)
set -euo pipefail

# root's PATH under sudo/CI may lack sbin, where the daemons live.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE_DIR="${CURATOR_SLURM_STATE:-/var/tmp/curator-slurm}"
MAX_ARRAY_SIZE="${CURATOR_SLURM_MAX_ARRAY_SIZE:-1001}"
CPUS="${CURATOR_SLURM_CPUS:-}"
WAIT_SECS="${CURATOR_SLURM_WAIT:-60}"
CLUSTER_NAME="curator"
PARTITION="debug"
CONF="/etc/slurm/slurm.conf"
MUNGE_KEY="/etc/munge/munge.key"
PID_DIR="$STATE_DIR/pids"
LOG_DIR="$STATE_DIR/log"

log() { echo "slurm-up: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

while (($#)); do
    case "$1" in
        --max-array-size) [[ $# -ge 2 ]] || die "--max-array-size needs a value"
                          MAX_ARRAY_SIZE="$2"; shift 2 ;;
        --max-array-size=*) MAX_ARRAY_SIZE="${1#*=}"; shift ;;
        --cpus) [[ $# -ge 2 ]] || die "--cpus needs a value"
                CPUS="$2"; shift 2 ;;
        --cpus=*) CPUS="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

if ! is_uint "$MAX_ARRAY_SIZE" || ((MAX_ARRAY_SIZE > 4000001)); then
    die "--max-array-size must be an integer in 0..4000001 (got '$MAX_ARRAY_SIZE')"
fi
if [[ -n "$CPUS" ]] && { ! is_uint "$CPUS" || ((CPUS == 0)); }; then
    die "--cpus must be a positive integer (got '$CPUS')"
fi
is_uint "$WAIT_SECS" || die "CURATOR_SLURM_WAIT must be an integer"
[[ "$(id -u)" == 0 ]] || die "must run as root"

# ---------------------------------------------------------------- packages
ensure_packages() {
    local cmd missing=()
    for cmd in slurmctld slurmd sbatch squeue scontrol sinfo munged munge; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
    done
    ((${#missing[@]} == 0)) && return 0
    log "installing Slurm/munge packages (missing: ${missing[*]})"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y slurmctld slurmd slurm-client munge
}

ensure_packages

mkdir -p "$STATE_DIR" "$PID_DIR" "$LOG_DIR" "$STATE_DIR/run" \
         "$STATE_DIR/spool/slurmctld" "$STATE_DIR/spool/slurmd" /etc/slurm

# Serialise concurrent callers (e.g. several test workers). Fd 9 is closed for
# every daemon we start, otherwise the daemons would hold the lock forever.
exec 9>"$STATE_DIR/up.lock"
flock -w 180 9 || die "timed out waiting for $STATE_DIR/up.lock"
# slurm-down.sh is called below for restarts and must not wait for our lock.
export CURATOR_SLURM_LOCK_HELD=1

# ------------------------------------------------------------ pid records
# Print the recorded pid of daemon $1 if that process is still alive and is
# really that daemon (a stale pid may have been reused by something else).
recorded_pid() {
    local name="$1" file="$PID_DIR/$1.pid" pid comm state
    [[ -f "$file" ]] || return 1
    pid="$(<"$file")"
    is_uint "$pid" || return 1
    comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
    [[ "$comm" == "$name" ]] || return 1
    state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" || return 1
    [[ "$state" != Z ]] || return 1
    echo "$pid"
}

# Pids of live processes whose command name is exactly $1 (no procps needed).
# Zombies are skipped: where pid 1 does not reap orphans, stopped daemons
# linger as zombies.
pids_named() {
    local f pid
    for f in /proc/[0-9]*/comm; do
        [[ "$(cat "$f" 2>/dev/null)" == "$1" ]] || continue
        pid="${f#/proc/}"; pid="${pid%/comm}"
        [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == Z ]] || echo "$pid"
    done
    return 0
}

# Refuse to fight a daemon somebody else started (it would hold the ports);
# we never kill it, we only report it.
# A daemon started with another configuration file (`-f OTHER.conf`, e.g. the 3-node cluster of
# scripts/slurm-multinode-up.sh, on its own ports) is not in the way and is left alone.
check_foreign() {
    local name="$1" mine pid others=""
    mine="$(recorded_pid "$name" || true)"
    for pid in $(pids_named "$name"); do
        [[ "$pid" == "${mine:-none}" ]] && continue
        if [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" =~ \ -f\ ([^ ]+) ]] && [[ "${BASH_REMATCH[1]}" != "$CONF" ]]; then
            continue
        fi
        others+="$pid "
    done
    [[ -z "$others" ]] || die "a $name not started by this script is running (pid(s): $others); stop it first"
}

# Start daemon $1 with command "${@:2}" in its own session, logging to
# $LOG_DIR/$1.stdout, and record its pid.
start_daemon() {
    local name="$1" pid; shift
    log "starting $name"
    # setsid: detach from the caller's terminal/process group so Ctrl-C or a
    # CI step ending does not take the daemon down. As a background child of
    # a non-interactive shell we are no process group leader, so setsid
    # exec()s in place and $! is the daemon's own pid.
    setsid "$@" </dev/null >>"$LOG_DIR/$name.stdout" 2>&1 9>&- &
    pid=$!
    echo "$pid" >"$PID_DIR/$name.pid"
    # Catch immediate start-up failures (bad config, port in use, ...).
    sleep 0.3
    check_alive "$name"
}

# Fail with the daemon's last log lines if recorded daemon $1 has died.
check_alive() {
    recorded_pid "$1" >/dev/null && return 0
    rm -f "$PID_DIR/$1.pid"
    log "$1 is not running (any more); last log lines:"
    tail -n 20 "$LOG_DIR/$1.stdout" >&2 2>/dev/null || true
    tail -n 20 "$LOG_DIR/$1.log" >&2 2>/dev/null || true
    die "$1 failed; logs in $LOG_DIR"
}

# ------------------------------------------------------------------- munge
munge_works() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

ensure_munge() {
    if [[ ! -s "$MUNGE_KEY" ]]; then
        log "creating munge key $MUNGE_KEY"
        mkdir -p "$(dirname "$MUNGE_KEY")"
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile="$MUNGE_KEY" --force
        else
            dd if=/dev/urandom of="$MUNGE_KEY" bs=1024 count=1 status=none
        fi
    fi
    # munged insists on strict ownership/permissions of its key and dirs.
    local user=root
    if getent passwd munge >/dev/null; then user=munge; fi
    chown "$user:$user" "$(dirname "$MUNGE_KEY")" "$MUNGE_KEY"
    chmod 0700 "$(dirname "$MUNGE_KEY")"
    chmod 0400 "$MUNGE_KEY"

    # Reuse any working munged (ours or a system one); start one otherwise.
    munge_works && return 0
    check_foreign munged
    if recorded_pid munged >/dev/null; then
        die "our munged is running but munge/unmunge fails; see /var/log/munge/munged.log"
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown "$user:$user" /run/munge /var/lib/munge /var/log/munge
    chmod 0755 /run/munge
    chmod 0700 /var/lib/munge /var/log/munge
    if [[ "$user" == munge ]]; then
        # setpriv exec()s, so the recorded pid stays munged's own pid.
        start_daemon munged setpriv --reuid=munge --regid=munge --init-groups \
            munged --foreground
    else
        start_daemon munged munged --foreground --force
    fi
    for _ in $(seq 50); do munge_works && return 0; sleep 0.1; done
    die "munged started but munge/unmunge does not work"
}

# ------------------------------------------------------------------ config
NODE="$(hostname -s)"
[[ -n "$NODE" ]] || die "hostname -s is empty"

# The node line comes from the real hardware (slurmd -C), with RealMemory
# lowered by 5% so small fluctuations never drain the node ("Low RealMemory").
node_line() {
    local hw mem low
    hw="$(slurmd -C | head -n 1)"
    [[ "$hw" == NodeName=* ]] || die "unexpected 'slurmd -C' output: $hw"
    mem="$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")"
    is_uint "$mem" || die "no RealMemory in 'slurmd -C' output: $hw"
    low=$((mem * 95 / 100))
    if [[ -n "$CPUS" ]]; then
        # Advertise a chosen CPU count (more parallel tasks on small runners);
        # accepted thanks to SlurmdParameters=config_overrides.
        echo "NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$low State=UNKNOWN"
    else
        # NodeAddr: never depend on the hostname resolving.
        sed -e "s/^NodeName=[^ ]*/NodeName=$NODE NodeAddr=127.0.0.1/" \
            -e "s/RealMemory=[0-9]*/RealMemory=$low/" <<<"$hw" | tr -d '\n'
        echo " State=UNKNOWN"
    fi
}

render_conf() {
    local max_jobs=10000
    # MaxJobCount must stay well above the largest array.
    ((MAX_ARRAY_SIZE * 2 > max_jobs)) && max_jobs=$((MAX_ARRAY_SIZE * 2))
    cat <<EOF
# Written by curator-slurm scripts/slurm-up.sh -- local test cluster.
# Manual edits are overwritten on the next run.
ClusterName=$CLUSTER_NAME
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# No systemd/cgroups on the test machines.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
# CR_CPU: jobs need not ask for memory and several can share the node.
SelectTypeParameters=CR_CPU
# Schedule right at submit/completion and re-check the queue every second.
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1,default_queue_depth=1000
# Keep finished jobs visible to squeue -t all / scontrol for an hour.
MinJobAge=3600
MaxArraySize=$MAX_ARRAY_SIZE
MaxJobCount=$max_jobs
ReturnToService=2
MailProg=/bin/true
KillWait=10
InactiveLimit=0
EnforcePartLimits=ALL
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldPidFile=$STATE_DIR/run/slurmctld.pid
SlurmdPidFile=$STATE_DIR/run/slurmd.pid
StateSaveLocation=$STATE_DIR/spool/slurmctld
SlurmdSpoolDir=$STATE_DIR/spool/slurmd
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
${CPUS:+SlurmdParameters=config_overrides
}$NODE_LINE
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

# -------------------------------------------------------------- cluster ops
running_max_array_size() {
    scontrol show config 2>/dev/null | awk -F= '/^MaxArraySize/ {gsub(/ /, "", $2); print $2}'
}

# Node state as sinfo prints it, e.g. idle, mixed, down*, drained.
node_state() { sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n 1; }

node_ready() {
    case "$(node_state)" in
        idle|mixed|allocated|completing) return 0 ;;
        *) return 1 ;;
    esac
}

# Wait (bounded) until the node accepts work and slurmctld runs the wanted
# MaxArraySize; resume a DOWN/DRAINED node on the way.
wait_ready() {
    local deadline=$((SECONDS + WAIT_SECS)) state last_resume=-100
    while :; do
        state="$(node_state || true)"
        case "$state" in
            idle|mixed|allocated|completing)
                [[ "$(running_max_array_size)" == "$MAX_ARRAY_SIZE" ]] && return 0 ;;
            *down*|*drain*|*fail*)
                if ((SECONDS - last_resume >= 3)); then
                    log "node $NODE is '$state' ($(sinfo -h -N -n "$NODE" -o '%E' 2>/dev/null)); resuming"
                    scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
                    last_resume=$SECONDS
                    RESUMED=1
                fi ;;
        esac
        check_alive slurmctld
        check_alive slurmd
        if ((SECONDS >= deadline)); then
            log "node state: '${state:-no answer}', MaxArraySize: '$(running_max_array_size)'"
            tail -n 15 "$LOG_DIR/slurmctld.log" >&2 2>/dev/null || true
            tail -n 15 "$LOG_DIR/slurmd.log" >&2 2>/dev/null || true
            die "cluster not ready after ${WAIT_SECS}s"
        fi
        sleep 0.5
    done
}

summary() {
    echo "slurm-up: $1: cluster=$CLUSTER_NAME node=$NODE state=$(node_state) partition=$PARTITION" \
         "cpus=$(sinfo -h -N -n "$NODE" -o '%c' 2>/dev/null | head -n 1)" \
         "MaxArraySize=$(running_max_array_size) conf=$CONF state_dir=$STATE_DIR"
}

# ------------------------------------------------------------------- main
ensure_munge
check_foreign slurmctld
check_foreign slurmd

NODE_LINE="$(node_line)"
new_conf="$STATE_DIR/slurm.conf.new"
render_conf >"$new_conf"

ctld_pid="$(recorded_pid slurmctld || true)"
slurmd_pid="$(recorded_pid slurmd || true)"

# Fast path: same config, both daemons alive, node usable.
if cmp -s "$new_conf" "$CONF" && [[ -n "$ctld_pid" && -n "$slurmd_pid" ]] \
   && node_ready && [[ "$(running_max_array_size)" == "$MAX_ARRAY_SIZE" ]]; then
    rm -f "$new_conf"
    summary "already running"
    exit 0
fi

action="already running"
restart_ctld=0
restart_slurmd=0
if ! cmp -s "$new_conf" "$CONF"; then
    # Only array/job-count limits changed -> restarting slurmctld suffices
    # ('scontrol reconfigure' does not apply MaxArraySize).
    if [[ -f "$CONF" ]] && diff -q <(grep -Ev '^(MaxArraySize|MaxJobCount)=' "$CONF") \
                                   <(grep -Ev '^(MaxArraySize|MaxJobCount)=' "$new_conf") >/dev/null; then
        restart_ctld=1
    else
        restart_ctld=1
        restart_slurmd=1
    fi
    [[ -f "$CONF" ]] && cp -p "$CONF" "$STATE_DIR/slurm.conf.prev"
    mv -f "$new_conf" "$CONF"
    chmod 0644 "$CONF"
    log "wrote $CONF"
else
    rm -f "$new_conf"
    # Config file already right but the running slurmctld disagrees (e.g. an
    # earlier restart was interrupted).
    if [[ -n "$ctld_pid" ]] && [[ "$(running_max_array_size)" != "$MAX_ARRAY_SIZE" ]]; then
        restart_ctld=1
    fi
fi

if [[ -n "$ctld_pid" ]] && ((restart_ctld)); then
    log "restarting slurmctld (pid $ctld_pid) to apply the new config"
    "$SCRIPT_DIR/slurm-down.sh" slurmctld
    action="restarted slurmctld"
fi
if [[ -n "$slurmd_pid" ]] && ((restart_slurmd)); then
    log "restarting slurmd (pid $slurmd_pid) to apply the new config"
    "$SCRIPT_DIR/slurm-down.sh" slurmd
    action="restarted slurmctld+slurmd"
fi

# slurmctld keeps its state (jobs survive restarts); -i tolerates state
# files from another Slurm version instead of refusing to start.
if ! recorded_pid slurmctld >/dev/null; then
    start_daemon slurmctld slurmctld -D -i
    [[ "$action" != "already running" ]] || action="started"
fi
if ! recorded_pid slurmd >/dev/null; then
    start_daemon slurmd slurmd -D
    [[ "$action" != "already running" ]] || action="started"
fi

RESUMED=0
wait_ready
((RESUMED)) && action="$action, node resumed"
summary "$action"

#!/usr/bin/env bash
# Bring up (or verify) a real N-node Slurm cluster on this one machine, beside the single-node
# cluster of slurm-up.sh, for the multi-node tests (--nodes-per-task, srun -N).
#
# Every node is a network namespace plus a UTS namespace (its own hostname and IP on a private
# bridge); slurmctld runs in the root namespace; one `slurmd -N <node>` per node is started under
# `nsenter --net=... --uts=...` (not `ip netns exec`, which remounts /sys: slurmd then cannot find
# /sys/fs/cgroup and fails with "Unable to initialize cgroup plugin"). /etc/hosts gets one line per
# node (between marker lines, rewritten idempotently, removed by slurm-multinode-down.sh). munge is
# shared with the single-node cluster (slurm-up.sh starts it). The filesystem and the process table
# are shared by all nodes: only the network and the hostname differ, which is what a multi-node
# program (Ray, srun) can get wrong.
#
# The cluster has its own slurm.conf (another ClusterName, SlurmctldPort, SlurmdPort, state and
# spool dirs), under its state dir; select it with SLURM_CONF=<state dir>/slurm.conf (the summary
# line prints it). Every daemon it starts is recorded in <state dir>/pids/; only those are stopped.
# Idempotent: when everything already runs with the wanted config it only prints the summary.
# Must run as root.
#
# Usage: slurm-multinode-up.sh [--nodes N] [--cpus N]
#
# Environment:
#   CURATOR_SLURM_MN_STATE   state dir (default /var/tmp/curator-slurm-mn)
#   CURATOR_SLURM_MN_NODES   default for --nodes (default 3)
#   CURATOR_SLURM_MN_CPUS    default for --cpus: CPUs each node advertises (default 2)
#   CURATOR_SLURM_MN_NET     first three octets of the private /24 (default 10.213.0; bridge .1, nodes .11..)
#   CURATOR_SLURM_MN_PORT    SlurmctldPort (default 6827; SlurmdPort is one more)
#   CURATOR_SLURM_WAIT       seconds to wait for the nodes (default 60)
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE_DIR="${CURATOR_SLURM_MN_STATE:-/var/tmp/curator-slurm-mn}"
NODES="${CURATOR_SLURM_MN_NODES:-3}"
CPUS="${CURATOR_SLURM_MN_CPUS:-2}"
NET="${CURATOR_SLURM_MN_NET:-10.213.0}"
CTLD_PORT="${CURATOR_SLURM_MN_PORT:-6827}"
WAIT_SECS="${CURATOR_SLURM_WAIT:-60}"
CLUSTER_NAME="curatormn"
PARTITION="mn"
PREFIX="cnode"          # node names: cnode1, cnode2, ...
BRIDGE="cmnbr0"
CONF="$STATE_DIR/slurm.conf"
PID_DIR="$STATE_DIR/pids"
LOG_DIR="$STATE_DIR/log"
NS_DIR="$STATE_DIR/ns"  # bind mounts that keep each node's UTS namespace alive
HOSTS_BEGIN="# >>> curator-slurm multinode ($STATE_DIR) >>>"
HOSTS_END="# <<< curator-slurm multinode ($STATE_DIR) <<<"

log() { echo "slurm-multinode-up: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

while (($#)); do
    case "$1" in
        --nodes) [[ $# -ge 2 ]] || die "--nodes needs a value"; NODES="$2"; shift 2 ;;
        --nodes=*) NODES="${1#*=}"; shift ;;
        --cpus) [[ $# -ge 2 ]] || die "--cpus needs a value"; CPUS="$2"; shift 2 ;;
        --cpus=*) CPUS="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

{ is_uint "$NODES" && ((NODES >= 2 && NODES <= 50)); } || die "--nodes must be an integer in 2..50 (got '$NODES')"
{ is_uint "$CPUS" && ((CPUS >= 1)); } || die "--cpus must be a positive integer (got '$CPUS')"
[[ "$NET" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "CURATOR_SLURM_MN_NET must be three octets like 10.213.0 (got '$NET')"
is_uint "$CTLD_PORT" || die "CURATOR_SLURM_MN_PORT must be an integer"
is_uint "$WAIT_SECS" || die "CURATOR_SLURM_WAIT must be an integer"
[[ "$(id -u)" == 0 ]] || die "must run as root"
if ! command -v ip >/dev/null 2>&1; then
    log "installing iproute2 (ip is missing)"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y iproute2
fi
for cmd in ip nsenter unshare mountpoint flock slurmctld slurmd scontrol sinfo srun munge getent; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd not found; run scripts/slurm-up.sh first (it installs Slurm and munge)"
done
munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 \
    || die "munge does not work; run scripts/slurm-up.sh first (the clusters share its munged)"

mkdir -p "$STATE_DIR" "$PID_DIR" "$LOG_DIR" "$NS_DIR" "$STATE_DIR/run" "$STATE_DIR/spool/slurmctld"
exec 9>"$STATE_DIR/up.lock"
flock -w 180 9 || die "timed out waiting for $STATE_DIR/up.lock"

node_name() { echo "$PREFIX$1"; }
node_ip() { echo "$NET.$((10 + $1))"; }
netns_name() { echo "curator-$PREFIX$1"; }
veth_name() { echo "cmnv$1"; }

# ------------------------------------------------------------ pid records
# The recorded pid of daemon file $1 (slurmctld, slurmd-cnode1, ...) if it still runs our command:
# the right program, started with our config file (the other cluster's daemons have the same names).
recorded_pid() {
    local file="$PID_DIR/$1.pid" pid comm state
    [[ -f "$file" ]] || return 1
    pid="$(<"$file")"
    is_uint "$pid" || return 1
    comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
    [[ "$comm" == "${1%%-*}" ]] || return 1
    state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" || return 1
    [[ "$state" != Z ]] || return 1
    # (No `| grep -q` under pipefail: grep's early exit can fail the pipeline with SIGPIPE.)
    [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" == *" -f $CONF "* ]] || return 1
    echo "$pid"
}

# Start daemon $1 (record name) with command "${@:2}" in its own session and record its pid.
start_daemon() {
    local name="$1" pid; shift
    log "starting $name"
    # setsid and nsenter exec() in place (nsenter forks only to enter a PID namespace): $! is the daemon.
    setsid "$@" </dev/null >>"$LOG_DIR/$name.stdout" 2>&1 9>&- &
    pid=$!
    echo "$pid" >"$PID_DIR/$name.pid"
    sleep 0.3
    check_alive "$name"
}

check_alive() {
    recorded_pid "$1" >/dev/null && return 0
    rm -f "$PID_DIR/$1.pid"
    log "$1 is not running (any more); last log lines:"
    tail -n 20 "$LOG_DIR/$1.stdout" >&2 2>/dev/null || true
    tail -n 20 "$LOG_DIR/$1.log" >&2 2>/dev/null || true
    die "$1 failed; logs in $LOG_DIR"
}

# ---------------------------------------------------------------- network
# The bridge (with the root namespace's address on it, so slurmctld and the clients reach every node),
# then per node: a network namespace with lo up and one end of a veth pair as eth0 on the bridge, and
# a UTS namespace whose hostname is the node name. Each step is skipped when already done.
ensure_network() {
    local i node ns veth uts
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        log "creating bridge $BRIDGE ($NET.1/24)"
        ip link add "$BRIDGE" type bridge
    fi
    [[ "$(ip addr show dev "$BRIDGE")" == *"inet $NET.1/24 "* ]] || ip addr add "$NET.1/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for ((i = 1; i <= NODES; i++)); do
        node="$(node_name "$i")" ns="$(netns_name "$i")" veth="$(veth_name "$i")" uts="$NS_DIR/uts-$(node_name "$i")"
        [[ -e "/run/netns/$ns" ]] || { log "creating network namespace $ns"; ip netns add "$ns"; }
        if ! ip link show "$veth" >/dev/null 2>&1; then
            ip -n "$ns" link del eth0 >/dev/null 2>&1 || true
            ip link add "$veth" type veth peer name eth0 netns "$ns"
        fi
        ip link set "$veth" master "$BRIDGE"
        ip link set "$veth" up
        ip -n "$ns" link set lo up
        [[ "$(ip -n "$ns" addr show dev eth0)" == *"inet $(node_ip "$i")/24 "* ]] \
            || ip -n "$ns" addr add "$(node_ip "$i")/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" route replace default via "$NET.1" dev eth0
        if ! mountpoint -q "$uts" 2>/dev/null && ! grep -qF " $uts " /proc/self/mountinfo; then
            touch "$uts"
            unshare --uts="$uts" hostname "$node"
        fi
        [[ "$(nsenter --uts="$uts" hostname)" == "$node" ]] || nsenter --uts="$uts" hostname "$node"
    done
}

# /etc/hosts: our block (between the marker lines) replaced in place; the file is rewritten through
# its own inode, as it may be a bind mount.
ensure_hosts() {
    local tmp i
    tmp="$(mktemp)"
    awk -v b="$HOSTS_BEGIN" -v e="$HOSTS_END" '$0 == b {skip = 1} !skip {print} $0 == e {skip = 0}' /etc/hosts >"$tmp"
    {
        echo "$HOSTS_BEGIN"
        for ((i = 1; i <= NODES; i++)); do echo "$(node_ip "$i") $(node_name "$i")"; done
        echo "$HOSTS_END"
    } >>"$tmp"
    cmp -s "$tmp" /etc/hosts || { cat "$tmp" >/etc/hosts; log "updated /etc/hosts"; }
    rm -f "$tmp"
}

# ------------------------------------------------------------------ config
render_conf() {
    local i
    cat <<EOF
# Written by curator-slurm scripts/slurm-multinode-up.sh -- local multi-node test cluster.
# Manual edits are overwritten on the next run. Clients select it with SLURM_CONF=$CONF.
ClusterName=$CLUSTER_NAME
SlurmctldHost=$(hostname -s)($NET.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1,default_queue_depth=1000
MinJobAge=3600
MaxArraySize=1001
ReturnToService=2
MailProg=/bin/true
KillWait=10
InactiveLimit=0
EnforcePartLimits=ALL
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldPidFile=$STATE_DIR/run/slurmctld.pid
SlurmdPidFile=$STATE_DIR/run/slurmd-%n.pid
StateSaveLocation=$STATE_DIR/spool/slurmctld
SlurmdSpoolDir=$STATE_DIR/spool/slurmd-%n
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# The nodes share one machine: they advertise a chosen CPU count and little memory.
SlurmdParameters=config_overrides
EOF
    for ((i = 1; i <= NODES; i++)); do
        echo "NodeName=$(node_name "$i") NodeHostname=$(node_name "$i") NodeAddr=$(node_ip "$i") CPUs=$CPUS RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
}

all_nodes() { local i; for ((i = 1; i <= NODES; i++)); do node_name "$i"; done; }

node_states() { SLURM_CONF="$CONF" sinfo -h -N -o '%N %T' 2>/dev/null | sort -u; }

# Wait (bounded) until every node accepts work; resume DOWN/DRAINED ones on the way.
wait_ready() {
    local deadline=$((SECONDS + WAIT_SECS)) node state ready last_resume=-100 i
    while :; do
        ready=0
        while read -r node state; do
            case "$state" in
                idle|mixed|allocated|completing) ready=$((ready + 1)) ;;
                *down*|*drain*|*fail*)
                    if ((SECONDS - last_resume >= 3)); then
                        log "node $node is '$state'; resuming"
                        SLURM_CONF="$CONF" scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
                        last_resume=$SECONDS
                    fi ;;
            esac
        done < <(node_states)
        ((ready == NODES)) && return 0
        check_alive slurmctld
        for ((i = 1; i <= NODES; i++)); do check_alive "slurmd-$(node_name "$i")"; done
        if ((SECONDS >= deadline)); then
            node_states >&2 || true
            tail -n 15 "$LOG_DIR/slurmctld.log" >&2 2>/dev/null || true
            die "$ready of $NODES nodes ready after ${WAIT_SECS}s; logs in $LOG_DIR"
        fi
        sleep 0.5
    done
}

# srun -N <all>: one task per node, each reporting its hostname and address; they must all differ.
verify() {
    local out hosts ips
    out="$(SLURM_CONF="$CONF" timeout 60 srun -N "$NODES" --ntasks-per-node=1 \
        bash -c 'echo "$(hostname) $(ip -4 -o addr show dev eth0 | awk "{print \$4}")"' 2>&1)" \
        || die "srun -N $NODES failed: $out"
    hosts="$(awk '{print $1}' <<<"$out" | sort -u | wc -l)"
    ips="$(awk '{print $2}' <<<"$out" | sort -u | wc -l)"
    ((hosts == NODES && ips == NODES)) || die "srun -N $NODES gave $hosts distinct hostnames and $ips IPs: $out"
}

summary() {
    echo "slurm-multinode-up: $1: cluster=$CLUSTER_NAME nodes=$(all_nodes | paste -sd, -)" \
         "partition=$PARTITION cpus_per_node=$CPUS port=$CTLD_PORT conf=$CONF" \
         "(use SLURM_CONF=$CONF) state_dir=$STATE_DIR"
}

# ------------------------------------------------------------------- main
ensure_network
ensure_hosts

new_conf="$STATE_DIR/slurm.conf.new"
render_conf >"$new_conf"
action="already running"
if ! cmp -s "$new_conf" "$CONF"; then
    mv -f "$new_conf" "$CONF"
    chmod 0644 "$CONF"
    log "wrote $CONF"
    if [[ -d "$PID_DIR" ]] && ls "$PID_DIR"/*.pid >/dev/null 2>&1; then
        log "config changed: restarting the daemons"
        CURATOR_SLURM_MN_LOCK_HELD=1 "$SCRIPT_DIR/slurm-multinode-down.sh" --daemons-only
        action="restarted"
    fi
else
    rm -f "$new_conf"
fi

export SLURM_CONF="$CONF"
if ! recorded_pid slurmctld >/dev/null; then
    start_daemon slurmctld slurmctld -D -i -f "$CONF"
    action="started"
fi
for ((i = 1; i <= NODES; i++)); do
    node="$(node_name "$i")"
    if ! recorded_pid "slurmd-$node" >/dev/null; then
        mkdir -p "$STATE_DIR/spool/slurmd-$node"
        start_daemon "slurmd-$node" nsenter --net="/run/netns/$(netns_name "$i")" --uts="$NS_DIR/uts-$node" \
            slurmd -D -N "$node" -f "$CONF"
        action="started"
    fi
done

wait_ready
verify
summary "$action"

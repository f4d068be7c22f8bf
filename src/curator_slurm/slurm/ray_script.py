"""The part of a multi-node array task's sbatch script that runs Ray over the task's nodes (``--nodes-per-task``
above 1): a head on the batch step's node, a worker on each other node, each as an srun step of its own, and
their clean-up on every node however the task ends. :func:`~curator_slurm.slurm.submit.render_script` puts it
where a single-node task has its ``exec`` line.
"""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from curator_slurm.slurm.submit import SubmitOptions

#: Seconds a multi-node task waits for its Ray head to listen before it gives up.
HEAD_START_SECONDS = 300

#: What runs Ray on one node of a multi-node task, as the task of an srun step of its own: ``ray start
#: --block`` with a temporary directory for this task on this node. On SIGUSR1 (the batch script's way
#: to end the steps: ``scancel --signal=USR1`` reaches every step but the batch one, while SIGTERM to
#: srun would make it kill its step at once) or SIGTERM (scancel, the time limit), or when Ray ends on
#: its own, every Ray process of that directory (``ray start``, raylet, GCS, ...; their workers exit
#: with their raylet) gets TERM, then KILL 4 s later (a worker node's raylet may wait a long time for a
#: head that is going away), and the directory is removed: done in about 5 s, within Slurm's KillWait,
#: so nothing of the task stays on any node. The processes are found by the directory in their command
#: line, never by name; ``-z`` makes each argument a line and ``\(/\|$\)`` keeps the search from
#: finding itself.
_RAY_NODE = r"""tmp="/tmp/curator-ray-${SLURM_JOB_ID}-${SLURMD_NODENAME}"
"$@" --temp-dir="$tmp" &
stopped=0
trap 'stopped=1' TERM INT USR1
status=0
wait $! || status=$?
[ "$stopped" = 1 ] && status=0  # stopped on purpose: not an error of this node
left() { grep -lsz -- "$tmp\(/\|$\)" /proc/[0-9]*/cmdline | sed 's,^/proc/\([0-9]*\)/cmdline$,\1,'; }
for sig in TERM TERM TERM TERM KILL; do
  pids="$(left)"
  [ -z "$pids" ] && break
  kill -s "$sig" $pids 2>/dev/null
  sleep 1
done
rm -rf "$tmp"
exit "$status"
"""


def ray_cluster_block(opts: SubmitOptions, command: str) -> list[str]:
    """Start Ray over this task's nodes (head on the node of the batch step), run the pipeline against
    it, stop Ray and remove its files on every node.

    Addresses: the head advertises (``--node-ip-address``) and ``RAY_ADDRESS`` names the address
    Slurm's ``NodeAddr`` (or the node name) resolves to, unless that is loopback (Debian's
    ``/etc/hosts`` maps the host's own name to 127.0.1.1), then the node's first non-loopback one;
    the other nodes join from the address of their route to the head (Ray's own choice).
    Authentication: a random token per task in ``RAY_AUTH_MODE=token`` / ``RAY_AUTH_TOKEN``, which
    every ``srun`` step and the pipeline inherit (Ray versions without token authentication ignore
    them); it is in no file and no log. ``RAY_AUTH_MODE`` set by ``--env-setup`` is kept.
    """
    ray = shlex.quote(os.path.join(os.path.dirname(opts.python), "ray"))
    cpus = opts.cpus_per_task or "${SLURM_CPUS_ON_NODE}"
    wait = HEAD_START_SECONDS
    node_step = 'bash -c "$ray_node" ray-node'
    return [
        'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))',
        'head_node="${SLURMD_NODENAME:-${nodes[0]}}"  # the batch step runs on the first node: the head',
        "# The address the other nodes reach the head at (see ray_cluster_block in curator_slurm.slurm.ray_script).",
        "# (Each lookup may fail: '|| true', so that the check below says what is wrong.)",
        'head="$(scontrol show node -o "$head_node" | sed -n "s/.*NodeAddr=\\([^ ]*\\).*/\\1/p" || true)"',
        'head="$(getent ahostsv4 "${head:-$head_node}" | awk "NR == 1 {print \\$1}" || true)"',
        'case "$head" in ""|127.*) head="$(hostname -I 2>/dev/null | awk "{print \\$1}" || true)" ;; esac',
        'if [ -z "$head" ]; then',
        '  echo "curator-slurm: no non-loopback IPv4 address on $head_node for the Ray head" >&2',
        "  exit 1",
        "fi",
        "port=$((20000 + SLURM_JOB_ID % 40000))  # every array task has its own job id, so its own port",
        'export RAY_ADDRESS="$head:$port"',
        'export CURATOR_RAY_NODES="${#nodes[@]}"  # the pipeline waits for them all to join',
        "# This array task for scancel: its SLURM_JOB_ID may be the array's id, which would name every task.",
        'this_task="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}}"',
        'this_task="${this_task:-$SLURM_JOB_ID}"',
        'export RAY_AUTH_MODE="${RAY_AUTH_MODE:-token}"  # one random token per task, for every node',
        'export RAY_AUTH_TOKEN="$(od -An -tx1 -N32 /dev/urandom | tr -d " \\n")"',
        "read -r -d '' ray_node <<'END_OF_RAY_NODE' || true",
        *_RAY_NODE.splitlines(),
        "END_OF_RAY_NODE",
        'echo "curator-slurm: Ray head on $head_node at $RAY_ADDRESS; nodes: ${nodes[*]}"',
        f'srun --nodes=1 --ntasks=1 -w "$head_node" {node_step} {ray} start --head --block --port="$port" '
        f'--num-cpus={cpus} --node-ip-address="$head" --include-dashboard=false &',
        "waited=0  # until the head listens on its port: a loaded node may take a while",
        'until (exec 3<>"/dev/tcp/$head/$port") 2>/dev/null; do',
        f'  if [ "$waited" -ge {wait} ]; then',
        f'    echo "curator-slurm: the Ray head on $head_node at $head:$port did not start in {wait} s '
        '(see its output above)" >&2',
        '    scancel --signal=USR1 "$this_task" 2>/dev/null || true',
        "    wait",
        "    exit 1",
        "  fi",
        "  sleep 1",
        "  waited=$((waited + 1))",
        "done",
        'for node in "${nodes[@]}"; do',
        '  [ "$node" = "$head_node" ] && continue',
        f'  srun --nodes=1 --ntasks=1 -w "$node" {node_step} {ray} start --block --address="$RAY_ADDRESS" '
        f"--num-cpus={cpus} &",
        "done",
        f"{command} &",
        "child=$!",
        'for sig in TERM USR1 USR2; do trap "kill -s $sig $child 2>/dev/null || true" $sig; done',
        "status=0",
        'wait "$child" || status=$?',
        'while kill -0 "$child" 2>/dev/null; do wait "$child" || status=$?; done',
        "# Stop this task's Ray by ending its srun steps (`ray stop` would end every Ray on the node,",
        "# those of other array tasks sharing it too): SIGUSR1 to every step but this batch step makes",
        "# each stop its node's Ray and remove its files (SIGTERM would make srun kill its step at once).",
        'scancel --signal=USR1 "$this_task" 2>/dev/null || true',
        'for _ in $(seq 30); do [ -z "$(jobs -rp)" ] && break; sleep 1; done',
        "kill $(jobs -p) 2>/dev/null || true",
        "wait",
        'exit "$status"',
    ]

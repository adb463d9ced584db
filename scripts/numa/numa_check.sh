#!/usr/bin/env bash
# Reports the NUMA layout of this node and checks the binding of the running rank: which CPUs and
# memory nodes it may use, whether they stay within one NUMA node, and (optionally) the expected one.
#
# usage: numa_check.sh [--pid PID] [--expect-node N]
#   srun --ntasks-per-node=4 --gpus-per-task=1 --cpu-bind=... scripts/numa/numa_check.sh
# Without --pid it checks itself, i.e. the binding the launcher gave this rank. Exit status: 0 when
# the rank is bound to a single NUMA node (and to N when --expect-node is given), 1 otherwise.
# Environment: SOF_SYSFS_NODE_DIR replaces /sys/devices/system/node (tests).
set -euo pipefail

pid=$$
expect=""
while [[ $# -gt 0 ]]; do
    case "$1" in
    --pid) pid="${2:?--pid needs a value}"; shift 2 ;;
    --expect-node) expect="${2:?--expect-node needs a value}"; shift 2 ;;
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "numa_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
sysfs="${SOF_SYSFS_NODE_DIR:-/sys/devices/system/node}"
status="/proc/$pid/status"
[[ -r "$status" ]] || { echo "numa_check.sh: cannot read $status" >&2; exit 2; }

# expand "0-3,8" -> "0 1 2 3 8"
expand() {
    local out=() part lo hi
    IFS=',' read -ra parts <<<"$1"
    for part in "${parts[@]}"; do
        [[ -z "$part" ]] && continue
        if [[ "$part" == *-* ]]; then
            lo="${part%-*}"; hi="${part#*-}"
            for ((i = lo; i <= hi; i++)); do out+=("$i"); done
        else
            out+=("$part")
        fi
    done
    echo "${out[@]:-}"
}

host="$(hostname 2>/dev/null || echo '?')"
rank="${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-?}}"
lrank="${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-?}}"
echo "== $host rank $rank local rank $lrank pid $pid"
echo "-- NUMA nodes ($sysfs)"
declare -A node_of_cpu=()
for d in "$sysfs"/node[0-9]*; do
    [[ -d "$d" ]] || continue
    n="${d##*/node}"
    cl="$(tr -d '[:space:]' <"$d/cpulist" 2>/dev/null || true)"
    mem="$(awk '/MemTotal/ {printf "%.1f GB", $4 * 1024 / 1e9}' "$d/meminfo" 2>/dev/null || true)"
    echo "   node $n: CPUs ${cl:-none}  memory ${mem:-?}"
    for c in $(expand "$cl"); do node_of_cpu[$c]=$n; done
done
if command -v numactl >/dev/null 2>&1; then
    echo "-- numactl --hardware"
    numactl --hardware | sed 's/^/   /'
else
    echo "-- numactl not installed (apt install numactl) - using /proc and /sys only"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
    echo "-- GPUs (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset})"
    nvidia-smi topo -m 2>/dev/null | sed 's/^/   /' || true
fi

cpus="$(awk '/^Cpus_allowed_list/ {print $2}' "$status")"
mems="$(awk '/^Mems_allowed_list/ {print $2}' "$status")"
echo "-- binding of pid $pid: CPUs $cpus, memory nodes $mems"
declare -A seen=()
for c in $(expand "$cpus"); do
    seen[${node_of_cpu[$c]:-?}]=1
done
nodes="$(printf '%s\n' "${!seen[@]}" | sort -n | tr '\n' ' ' | sed 's/ $//')"
echo "   its CPUs lie on NUMA node(s): $nodes"
ok=1
if [[ "${#seen[@]}" -ne 1 ]]; then
    echo "   WARNING: CPUs span ${#seen[@]} NUMA nodes: the rank is not bound to one Superchip" \
        "(use srun --cpu-bind=... or scripts/numa/bind_wrapper.sh)"
    ok=0
fi
if [[ -n "$expect" && "$nodes" != "$expect" ]]; then
    echo "   WARNING: expected NUMA node $expect"
    ok=0
fi
if [[ $ok -eq 1 ]]; then
    echo "   OK: bound to NUMA node $nodes"
    exit 0
fi
exit 1

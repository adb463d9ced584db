#!/usr/bin/env bash
# Per-rank NUMA binding for launchers that do not bind (or bind wrongly): picks this rank's NUMA
# node from its local rank (SLURM_LOCALID / OMPI_COMM_WORLD_LOCAL_RANK) and execs the command under
# `numactl --cpunodebind=N --membind=N` (taskset when numactl is missing).
#
# usage: bind_wrapper.sh [--dry-run] [--node N] -- COMMAND [ARGS...]
#   srun --ntasks-per-node=4 --cpu-bind=none scripts/numa/bind_wrapper.sh -- build/bin/superoffload train DECK
# The node is  cpu_nodes[local_rank * #cpu_nodes / local_size]  over the NUMA nodes that have CPUs
# (on GH200: Grace nodes 0..3; the HBM nodes 4,12,20,28 have none), so local rank r of 4 -> node r.
# Environment: SOF_NUMA_NODE forces the node; SOF_SYSFS_NODE_DIR replaces /sys/devices/system/node
# (tests).
set -euo pipefail

dry_run=0
node=""
while [[ $# -gt 0 ]]; do
    case "$1" in
    --dry-run) dry_run=1; shift ;;
    --node) node="${2:?--node needs a value}"; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) break ;;
    esac
done
if [[ $# -eq 0 ]]; then
    echo "bind_wrapper.sh: no command given (usage: bind_wrapper.sh [--dry-run] [--node N] -- CMD ...)" >&2
    exit 2
fi

local_rank="${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-${MPI_LOCALRANKID:-0}}}"
local_size="${OMPI_COMM_WORLD_LOCAL_SIZE:-${SLURM_NTASKS_PER_NODE:-${MPI_LOCALNRANKS:-1}}}"
# SLURM_NTASKS_PER_NODE can look like "4(x2)" on heterogeneous allocations: keep the number
local_size="${local_size%%(*}"
sysfs="${SOF_SYSFS_NODE_DIR:-/sys/devices/system/node}"

# NUMA nodes that have CPUs, ascending
cpu_nodes=()
if [[ -d "$sysfs" ]]; then
    for d in "$sysfs"/node[0-9]*; do
        [[ -e "$d/cpulist" ]] || continue
        if [[ -n "$(tr -d '[:space:]' <"$d/cpulist")" ]]; then
            cpu_nodes+=("${d##*/node}")
        fi
    done
fi
mapfile -t cpu_nodes < <(printf '%s\n' "${cpu_nodes[@]}" | sort -n | sed '/^$/d')

if [[ -z "$node" ]]; then node="${SOF_NUMA_NODE:-}"; fi
if [[ -z "$node" ]]; then
    if [[ ${#cpu_nodes[@]} -eq 0 ]]; then
        echo "bind_wrapper.sh: no NUMA information under $sysfs; running unbound" >&2
        [[ $dry_run -eq 1 ]] && { echo "exec $*"; exit 0; }
        exec "$@"
    fi
    if ((local_size < 1)); then local_size=1; fi
    idx=$((local_rank * ${#cpu_nodes[@]} / local_size))
    if ((idx >= ${#cpu_nodes[@]})); then idx=$((${#cpu_nodes[@]} - 1)); fi
    node="${cpu_nodes[$idx]}"
fi

cpus=""
[[ -e "$sysfs/node$node/cpulist" ]] && cpus="$(tr -d '[:space:]' <"$sysfs/node$node/cpulist")"
echo "bind_wrapper.sh: local rank $local_rank/$local_size -> NUMA node $node (CPUs ${cpus:-?})" >&2

if command -v numactl >/dev/null 2>&1; then
    cmd=(numactl "--cpunodebind=$node" "--membind=$node" -- "$@")
elif command -v taskset >/dev/null 2>&1 && [[ -n "$cpus" ]]; then
    echo "bind_wrapper.sh: numactl not found: binding CPUs only (taskset), memory is first-touch" >&2
    cmd=(taskset -c "$cpus" "$@")
else
    echo "bind_wrapper.sh: neither numactl nor taskset: running unbound" >&2
    cmd=("$@")
fi
if [[ $dry_run -eq 1 ]]; then
    echo "exec ${cmd[*]}"
    exit 0
fi
exec "${cmd[@]}"

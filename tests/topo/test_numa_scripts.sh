#!/usr/bin/env bash
# Tests scripts/numa/*.sh against a fake sysfs of a 4-Superchip GH200 node (Grace nodes 0-3 with
# 72 CPUs each, CPU-less HBM nodes 4/12/20/28) and a fake resctrl tree. Exit 0 = all passed.
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check NAME EXPECTED ACTUAL
    if [[ "$2" == "$3" ]]; then echo "ok   $1"; else echo "FAIL $1: expected '$2', got '$3'"; fail=1; fi
}

sys="$tmp/node"
for n in 0 1 2 3; do
    mkdir -p "$sys/node$n"
    echo "$((n * 72))-$((n * 72 + 71))" >"$sys/node$n/cpulist"
    echo "Node $n MemTotal: 125829120 kB" >"$sys/node$n/meminfo"
done
for n in 4 12 20 28; do
    mkdir -p "$sys/node$n"
    echo "" >"$sys/node$n/cpulist"
done
export SOF_SYSFS_NODE_DIR="$sys"
unset OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE MPI_LOCALRANKID MPI_LOCALNRANKS

# bind_wrapper: local rank r of 4 -> node r (numactl) or its CPUs (taskset)
for r in 0 1 2 3; do
    out="$(SLURM_LOCALID=$r SLURM_NTASKS_PER_NODE=4 "$src/scripts/numa/bind_wrapper.sh" --dry-run -- prog arg 2>/dev/null)"
    if command -v numactl >/dev/null; then
        check "bind_wrapper rank $r" "exec numactl --cpunodebind=$r --membind=$r -- prog arg" "$out"
    else
        check "bind_wrapper rank $r" "exec taskset -c $((r * 72))-$((r * 72 + 71)) prog arg" "$out"
    fi
done
# 8 ranks on 4 nodes: ranks 2,3 -> node 1; "4(x2)" parses as 4
out="$(SLURM_LOCALID=3 SLURM_NTASKS_PER_NODE=8 "$src/scripts/numa/bind_wrapper.sh" --dry-run -- p 2>&1 >/dev/null | sed -n 1p)"
check "bind_wrapper 8 ranks" "bind_wrapper.sh: local rank 3/8 -> NUMA node 1 (CPUs 72-143)" "$out"
out="$(SLURM_LOCALID=1 SLURM_NTASKS_PER_NODE='4(x2)' "$src/scripts/numa/bind_wrapper.sh" --dry-run -- p 2>&1 >/dev/null | sed -n 1p)"
check "bind_wrapper 4(x2)" "bind_wrapper.sh: local rank 1/4 -> NUMA node 1 (CPUs 72-143)" "$out"
out="$(SOF_NUMA_NODE=2 "$src/scripts/numa/bind_wrapper.sh" --dry-run -- p 2>&1 >/dev/null | sed -n 1p)"
check "bind_wrapper SOF_NUMA_NODE" "bind_wrapper.sh: local rank 0/1 -> NUMA node 2 (CPUs 144-215)" "$out"
rc=0; "$src/scripts/numa/bind_wrapper.sh" --dry-run >/dev/null 2>&1 || rc=$?
check "bind_wrapper without a command" 2 "$rc"

# numa_check: this process's CPUs (whatever they are) against the fake layout
mine="$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)"
if [[ "$mine" == "0" || "$mine" == "0-1" || "$mine" =~ ^0-([0-9]|[1-6][0-9]|7[01])$ ]]; then
    rc=0; "$src/scripts/numa/numa_check.sh" --expect-node 0 >"$tmp/nc.txt" || rc=$?
    check "numa_check bound to node 0" 0 "$rc"
    check "numa_check message" 1 "$(grep -c "OK: bound to NUMA node 0" "$tmp/nc.txt")"
    rc=0; "$src/scripts/numa/numa_check.sh" --expect-node 1 >/dev/null || rc=$?
    check "numa_check wrong node" 1 "$rc"
else
    echo "skip numa_check: this process may use CPUs $mine (not within fake node 0)"
fi
rc=0; "$src/scripts/numa/numa_check.sh" --bogus >/dev/null 2>&1 || rc=$?
check "numa_check bad argument" 2 "$rc"

# mpam_setup: dry run writes nothing; --apply into a fake resctrl writes the release-notes config
mkdir -p "$tmp/resctrl/info"
"$src/scripts/numa/mpam_setup.sh" --resctrl "$tmp/resctrl" >"$tmp/dry.txt"
check "mpam dry run writes nothing" "absent" "$([[ -e "$tmp/resctrl/p1" ]] && echo present || echo absent)"
check "mpam dry run message" 1 "$(grep -c "dry run: nothing written" "$tmp/dry.txt")"
"$src/scripts/numa/mpam_setup.sh" --resctrl "$tmp/resctrl" --apply >/dev/null
check "mpam p1 cpus" "0-6" "$(cat "$tmp/resctrl/p1/cpus_list")"
check "mpam p1 schemata" "MB:1=100 L3:1=ff0" "$(tr '\n' ' ' <"$tmp/resctrl/p1/schemata" | sed 's/ $//')"
check "mpam p2 cpus" "7-71" "$(cat "$tmp/resctrl/p2/cpus_list")"
check "mpam p2 schemata" "MB:1=20 L3:1=f" "$(tr '\n' ' ' <"$tmp/resctrl/p2/schemata" | sed 's/ $//')"
"$src/scripts/numa/mpam_setup.sh" --resctrl "$tmp/resctrl" --apply --domain 3 --bulk-mb 50 \
    --bulk-cpus 80-143 >/dev/null
check "mpam options" "MB:3=50 L3:3=f" "$(tr '\n' ' ' <"$tmp/resctrl/p2/schemata" | sed 's/ $//')"
check "mpam bulk cpus" "80-143" "$(cat "$tmp/resctrl/p2/cpus_list")"
rc=0; "$src/scripts/numa/mpam_setup.sh" --resctrl "$tmp/resctrl" --fast-mb 150 >/dev/null 2>&1 || rc=$?
check "mpam bad percentage" 2 "$rc"
rc=0; "$src/scripts/numa/mpam_setup.sh" --resctrl "$tmp/resctrl" --fast-cpus '0;rm' >/dev/null 2>&1 || rc=$?
check "mpam bad cpu list" 2 "$rc"

exit $fail

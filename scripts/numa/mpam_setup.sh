#!/usr/bin/env bash
# Arm MPAM cache and memory-bandwidth partitioning on Grace via the resctrl filesystem: two groups,
# "fast" cores (the rank's main / GPU-feeding threads) and "bulk" cores (optimizer workers, others).
#
# usage: mpam_setup.sh [--apply] [--remove] [--resctrl DIR] [--domain D]
#                      [--fast-cpus LIST] [--fast-mb PCT] [--fast-l3 MASK]
#                      [--bulk-cpus LIST] [--bulk-mb PCT] [--bulk-l3 MASK]
# Default is a DRY RUN: it checks the kernel and prints what it would write. --apply writes (root).
# Defaults are the settings recommended in the SuperOffload release notes for one Grace (72 cores):
#   p1: cpus 0-6,  schemata MB:1=100 L3:1=ff0      p2: cpus 7-71, schemata MB:1=20 L3:1=f
# Needs a kernel with CONFIG_ARM64_MPAM / CONFIG_ARM64_MPAM_RESCTRL_FS; without MPAM it says so and
# changes nothing. Domain ids and L3 way masks differ per system: read DIR/info/ first.
set -euo pipefail

apply=0
remove=0
root=/sys/fs/resctrl
domain=1
fast_cpus="0-6"; fast_mb=100; fast_l3="ff0"
bulk_cpus="7-71"; bulk_mb=20; bulk_l3="f"
while [[ $# -gt 0 ]]; do
    case "$1" in
    --apply) apply=1; shift ;;
    --remove) remove=1; shift ;;
    --resctrl) root="${2:?}"; shift 2 ;;
    --domain) domain="${2:?}"; shift 2 ;;
    --fast-cpus) fast_cpus="${2:?}"; shift 2 ;;
    --fast-mb) fast_mb="${2:?}"; shift 2 ;;
    --fast-l3) fast_l3="${2:?}"; shift 2 ;;
    --bulk-cpus) bulk_cpus="${2:?}"; shift 2 ;;
    --bulk-mb) bulk_mb="${2:?}"; shift 2 ;;
    --bulk-l3) bulk_l3="${2:?}"; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "mpam_setup.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$fast_mb" "$bulk_mb"; do
    [[ "$v" =~ ^[0-9]+$ && "$v" -ge 1 && "$v" -le 100 ]] ||
        { echo "mpam_setup.sh: memory bandwidth '$v' must be a percentage 1..100" >&2; exit 2; }
done
for v in "$fast_cpus" "$bulk_cpus"; do
    [[ "$v" =~ ^[0-9][0-9,-]*$ ]] || { echo "mpam_setup.sh: CPU list '$v' must look like 0-6,8" >&2; exit 2; }
done
[[ "$domain" =~ ^[0-9]+$ ]] || { echo "mpam_setup.sh: domain '$domain' must be a number" >&2; exit 2; }
for v in "$fast_l3" "$bulk_l3"; do
    [[ "$v" =~ ^[0-9a-fA-F]+$ ]] || { echo "mpam_setup.sh: L3 mask '$v' must be hex" >&2; exit 2; }
done

mode="dry run (pass --apply to write)"
[[ $apply -eq 1 ]] && mode="apply"
echo "mpam_setup.sh: $mode, resctrl at $root"

# 1. kernel support (informational: a custom --resctrl DIR skips it)
have_mpam=unknown
cfg="/boot/config-$(uname -r)"
if [[ -r "$cfg" ]]; then
    if grep -q '^CONFIG_ARM64_MPAM=y' "$cfg"; then have_mpam=yes; else have_mpam=no; fi
elif [[ -r /proc/config.gz ]]; then
    if zcat /proc/config.gz | grep -q '^CONFIG_ARM64_MPAM=y'; then have_mpam=yes; else have_mpam=no; fi
fi
echo "  kernel MPAM support: $have_mpam ($(uname -m), $(uname -r))"

# 2. resctrl mounted (or mountable)
mounted=0
if [[ "$root" != /sys/fs/resctrl ]]; then
    [[ -d "$root" ]] && mounted=1
elif grep -qs ' /sys/fs/resctrl resctrl ' /proc/mounts; then
    mounted=1
fi
if [[ $mounted -eq 0 ]]; then
    if ! grep -qs resctrl /proc/filesystems; then
        echo "  resctrl is not available on this kernel: no MPAM (or Intel RDT) partitioning here."
        echo "  Nothing to do. On Grace, ask the site for a kernel with CONFIG_ARM64_MPAM=y and"
        echo "  CONFIG_ARM64_MPAM_RESCTRL_FS=y (see docs/running-on-clusters.md)."
        exit 0
    fi
    echo "  + mount -t resctrl resctrl /sys/fs/resctrl"
    if [[ $apply -eq 1 ]]; then mount -t resctrl resctrl /sys/fs/resctrl; mounted=1; fi
fi
if [[ -d "$root/info" ]]; then
    for r in MB L3; do
        [[ -d "$root/info/$r" ]] && echo "  resource $r: $(cat "$root/info/$r/num_closids" 2>/dev/null || echo '?') CLOSIDs" \
            "$( [[ -r "$root/info/$r/cbm_mask" ]] && echo "cbm_mask $(cat "$root/info/$r/cbm_mask")")"
    done
fi

run() { # print one shell command, and run it when applying
    echo "  + $1"
    if [[ $apply -eq 1 ]]; then eval "$1"; fi
}

if [[ $remove -eq 1 ]]; then
    for g in p1 p2; do
        [[ -d "$root/$g" || $apply -eq 0 ]] && run "rmdir '$root/$g'"
    done
    exit 0
fi
run "mkdir -p '$root/p1' '$root/p2'"
run "echo '$fast_cpus' > '$root/p1/cpus_list'"
run "printf 'MB:$domain=$fast_mb\nL3:$domain=$fast_l3\n' > '$root/p1/schemata'"
run "echo '$bulk_cpus' > '$root/p2/cpus_list'"
run "printf 'MB:$domain=$bulk_mb\nL3:$domain=$bulk_l3\n' > '$root/p2/schemata'"
if [[ $apply -eq 1 ]]; then
    echo "  applied: p1 = CPUs $(cat "$root/p1/cpus_list"), p2 = CPUs $(cat "$root/p2/cpus_list")"
else
    echo "  dry run: nothing written"
fi

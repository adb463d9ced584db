#!/usr/bin/env bash
# The README's first command as a Grace user runs it, on x86-64: a whole arm64 Debian 12 system
# (debootstrap, both stages) entered with chroot, every arm64 program run by qemu-aarch64 through
# binfmt_misc, then this commit's tree cloned into it and `scripts/run_tiny.sh` run there: its apt
# installs, its native aarch64 build (the arm64 g++, grace_adam), the main job.
# Usage: scripts/arm64/chroot_main_job.sh [run_tiny.sh args, e.g. --set train.steps=4]
#   qemu-user emulates floating point in software: one step of the main job costs ~20 s of CPU
#   under it, so a short run is the practical check here (the 300-step losses: cross_test.sh --full).
# Env: SOF_ARM64_CHROOT (default ~/.cache/superoffload/arm64-chroot; kept, made once: ~2 min).
# Needs root and a kernel that lets root register binfmt_misc entries.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=${SOF_ARM64_CHROOT:-$HOME/.cache/superoffload/arm64-chroot}
MIRROR=${SOF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
t0=$(date +%s)
stamp() { echo "chroot_main_job: $1 at $(($(date +%s) - t0)) s"; }
[ "$(uname -m)" = x86_64 ] || { echo "chroot_main_job: on $(uname -m) run scripts/run_tiny.sh itself"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "chroot_main_job: needs root (debootstrap, chroot, binfmt_misc)" >&2; exit 1; }
scripts/apt_install.sh debootstrap qemu-user qemu-user-static
. scripts/arm64/binfmt.sh
sof_binfmt_aarch64 || {
  echo "chroot_main_job: cannot register a binfmt_misc entry for aarch64 here" \
    "(mount -t binfmt_misc refused): use scripts/arm64/cross_test.sh" >&2
  exit 1
}
if [ ! -f "$ROOT/.sof-chroot-ok" ]; then
  rm -rf "$ROOT"
  mkdir -p "$(dirname "$ROOT")"
  debootstrap --foreign --arch=arm64 --variant=minbase bookworm "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 ||
    { tail -20 "$ROOT.log" >&2; exit 1; }
  # the binfmt entry's interpreter path, resolved inside the root: a static qemu
  cp /usr/bin/qemu-aarch64-static "$ROOT/usr/bin/qemu-aarch64"
  chroot "$ROOT" /debootstrap/debootstrap --second-stage >>"$ROOT.log" 2>&1 ||
    { tail -20 "$ROOT.log" >&2; exit 1; }
  touch "$ROOT/.sof-chroot-ok"
  stamp "arm64 Debian 12 root made"
fi
chroot "$ROOT" uname -m | grep -qx aarch64 || { echo "chroot_main_job: the root does not run as aarch64" >&2; exit 1; }
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
mounted=()
cleanup() { for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done; }
trap cleanup EXIT
for m in proc sys dev dev/pts; do
  mountpoint -q "$ROOT/$m" && continue
  case $m in
    proc) mount -t proc proc "$ROOT/proc" ;;
    sys) mount -t sysfs sys "$ROOT/sys" ;;
    *) mount --bind "/$m" "$ROOT/$m" ;;
  esac
  mounted+=("$ROOT/$m")
done
# this commit's tree (uncommitted changes are not in it); a clone made before keeps its build/
dst="$ROOT/root/superoffload"
if [ -d "$dst/.git" ]; then
  git -C "$dst" fetch -q "$(pwd)" HEAD && git -C "$dst" checkout -q --force --detach FETCH_HEAD
else
  git clone -q "$(pwd)" "$dst"
fi
echo "chroot_main_job: $(git -C "$dst" rev-parse --short HEAD) checked out in $dst"
args=$(printf ' %q' "$@")
chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  DEBIAN_FRONTEND=noninteractive /bin/bash -c "cd /root/superoffload && uname -m && time scripts/run_tiny.sh$args"
stamp "done"

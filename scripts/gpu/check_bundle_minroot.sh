#!/usr/bin/env bash
# Run HERE, as root: checks the prebuilt bundle (scripts/gpu/make_bundle.sh) the way a lent GPU
# machine will see it, as far as a machine without a GPU can: in a minimal Debian 12 root
# (debootstrap --variant=minbase: the C/C++ runtime, coreutils, dpkg; none of our libraries, no
# ssh, no python) with only CUDA's toolkit folder added (what a CUDA image has), a copy of the
# working tree as the device tool sends it (tracked and untracked files, the bundle) at another
# path, then scripts/gpu/run_bundle.sh env test inside it: every binary's libraries resolve from
# the prefix, `superoffload --help` and `check` (MPI_Init as a singleton) run, mpirun starts 2
# ranks, every GPU test starts and exits 77 (no GPU). Also shows Open MPI's ssh failure without
# scripts/gpu/env.sh's launcher settings.
# Usage: scripts/gpu/check_bundle_minroot.sh [ROOT]   (default /tmp/minroot; made once, ~2 min)
set -euo pipefail
cd "$(dirname "$0")/../.."
R=${1:-/tmp/minroot}
[ -x "$R/bin/bash" ] || {
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  debootstrap --variant=minbase bookworm "$R" http://deb.debian.org/debian >/dev/null
}
[ -d .gpu-bundle ] || { echo "no .gpu-bundle: run scripts/gpu/make_bundle.sh first" >&2; exit 2; }
rm -rf "$R/repo" "$R/work" "$R/tmp/sofdeps" "$R/out"
mkdir -p "$R/repo" "$R/out"
# what the device tool sends: tracked + untracked-not-ignored files, and the carried bundle
git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$R/repo"
cp -a .gpu-bundle "$R/repo/"
# STAGES: run_bundle.sh's stages to run there (default "env test"; "env bench" checks the bench
# stage's commands, each failing for want of a GPU)
export STAGES=${STAGES:-env test}
unshare -m --propagation private bash -c '
  set -e
  R=$1
  mount -t proc proc "$R/proc"
  mount --bind /dev "$R/dev"
  mount --bind /sys "$R/sys"
  mkdir -p "$R/usr/local/cuda-13.0"
  mount --bind -o ro /usr/local/cuda-13.0 "$R/usr/local/cuda-13.0"
  ln -sfn cuda-13.0 "$R/usr/local/cuda"
  chroot "$R" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root OUT=/out \
    DECKS="${DECKS:-}" BUDGET="${BUDGET:-540}" bash -c "cd /repo && bash scripts/gpu/run_bundle.sh $STAGES"
  echo "== without env.sh launcher settings (plm rsh, no ssh in this root):"
  chroot "$R" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root bash -c "
    cd /repo && source scripts/gpu/env.sh .gpu-bundle/debs /tmp/sofdeps >/dev/null
    unset OMPI_MCA_plm
    timeout 60 /repo/.gpu-bundle/bin/superoffload check inputs/tiny.yaml 2>&1 | tail -6; echo rc=\${PIPESTATUS[0]}
    export OMPI_MCA_plm=isolated
    echo \"== with OMPI_MCA_plm=isolated:\"
    timeout 60 /repo/.gpu-bundle/bin/superoffload check inputs/tiny.yaml >/dev/null 2>&1; echo rc=\$?
    timeout 60 \$SOF_PREFIX/usr/bin/mpirun.openmpi -n 2 /repo/.gpu-bundle/bin/test_train_cuda; echo rc=\$?"
' _ "$R"
echo "== logs in $R/out:"
cat "$R/out/summary.txt"

#!/usr/bin/env bash
# An arm64 Debian 12 root holding the -dev packages of superoffload's dependencies, used as the
# sysroot of the aarch64 cross build (cmake/aarch64-linux-gnu.cmake) and as qemu-aarch64's -L root.
# Usage: scripts/arm64/make_root.sh DIR   (idempotent: a finished DIR is kept; ~120 MB download)
#
# debootstrap --foreign resolves the dependencies and downloads the packages without running any
# arm64 program; every downloaded package is then unpacked (dpkg-deb | tar, keeping the merged-/usr
# links) and the links that the packages' maintainer scripts would make (update-alternatives) are
# made by hand. Nothing is configured or run inside the root.
set -euo pipefail
DIR=${1:?usage: make_root.sh DIR}
MIRROR=${SOF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# the same dependencies as scripts/setup.sh installs natively, as arm64 -dev packages
PKGS=(libc6-dev libstdc++-12-dev libgomp1 libopenmpi-dev libhwloc-dev libnuma-dev libyaml-cpp-dev
      libopenblas-dev doctest-dev nlohmann-json3-dev libcli11-dev)
STAMP="$DIR/.sof-root-ok"
want="$SUITE ${PKGS[*]}"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "make_root: $DIR is ready"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "make_root: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
rm -rf "$DIR"
mkdir -p "$(dirname "$DIR")"
inc=$(IFS=,; echo "${PKGS[*]}")
echo "make_root: downloading $SUITE arm64 packages into $DIR"
debootstrap --foreign --arch=arm64 --variant=minbase --include="$inc" "$SUITE" "$DIR" "$MIRROR" \
  >"$DIR.debootstrap.log" 2>&1 || { tail -20 "$DIR.debootstrap.log" >&2; exit 1; }
# the first stage unpacked only the essential packages: unpack the rest (headers, libraries)
for deb in "$DIR"/var/cache/apt/archives/*.deb; do
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$DIR" --keep-directory-symlink --no-same-owner
done
rm -f "$DIR"/var/cache/apt/archives/*.deb "$DIR.debootstrap.log"
# update-alternatives links of libopenblas0-pthread / libopenblas-pthread-dev (their postinst)
lib="$DIR/usr/lib/aarch64-linux-gnu"
for l in libopenblas.so libopenblas.so.0 libblas.so libblas.so.3 liblapack.so liblapack.so.3; do
  ln -sfn "openblas-pthread/$l" "$lib/$l"
done
[ -e "$lib/openblas-pthread/libopenblas.so.0" ] || { echo "make_root: libopenblas missing in $DIR" >&2; exit 1; }
[ -e "$DIR/usr/lib/aarch64-linux-gnu/openmpi/include/mpi.h" ] || { echo "make_root: mpi.h missing" >&2; exit 1; }
echo "$want" >"$STAMP"
echo "make_root: $DIR is ready ($(du -sh "$DIR" | cut -f1))"

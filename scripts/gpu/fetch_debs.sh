#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with network): downloads the packages of packages.txt into .debs/
# (git-ignored) so that a GPU machine without network can build and run superoffload from them.
# Usage: scripts/gpu/fetch_debs.sh [DIR]   (default: .debs in the repository root; idempotent)
# Then, with the device tool: carry ".debs" and run scripts/gpu/build_and_test.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.debs}
mkdir -p "$DIR"
mapfile -t PKGS < <(grep -vE '^\s*(#|$)' scripts/gpu/packages.txt)
missing=()
for p in "${PKGS[@]}"; do
  compgen -G "$DIR/${p}_*.deb" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit 2>/dev/null)" ] ||
    apt-get update -qq
  # apt-get download writes into the current directory; _apt cannot always write there
  (cd "$DIR" && apt-get download "${missing[@]}" 2>&1 | grep -v "unsandboxed" || true)
fi
n=$(find "$DIR" -name '*.deb' | wc -l)
[ "$n" -ge "${#PKGS[@]}" ] || { echo "fetch_debs: only $n of ${#PKGS[@]} packages in $DIR" >&2; exit 1; }
echo "fetch_debs: $n packages, $(du -sh "$DIR" | cut -f1) in $DIR"

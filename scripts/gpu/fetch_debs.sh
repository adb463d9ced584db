#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with network): downloads the packages of a list into DIR (git-ignored)
# and those of fallback-packages.txt into DIR/fallback, so that a GPU machine without network can
# build (packages.txt) or run the prebuilt bundle (runtime-packages.txt) from them.
# Usage: scripts/gpu/fetch_debs.sh [DIR] [LIST]   (defaults: .debs, scripts/gpu/packages.txt; idempotent)
# Then, with the device tool: carry DIR and run scripts/gpu/build_and_test.sh there (README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.debs}
LIST=${2:-scripts/gpu/packages.txt}

# fetch LISTFILE INTO: apt-get download of the names not yet in INTO
fetch() {
  local list=$1 into=$2 p n
  mkdir -p "$into"
  mapfile -t PKGS < <(grep -vE '^\s*(#|$)' "$list")
  local missing=()
  for p in "${PKGS[@]}"; do
    compgen -G "$into/${p}_*.deb" >/dev/null || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit 2>/dev/null)" ] ||
      apt-get update -qq
    # apt-get download writes into the current directory; _apt cannot always write there
    (cd "$into" && apt-get download "${missing[@]}" 2>&1 | grep -v "unsandboxed" || true)
  fi
  n=0
  for p in "${PKGS[@]}"; do
    compgen -G "$into/${p}_*.deb" >/dev/null && n=$((n + 1))
  done
  [ "$n" -eq "${#PKGS[@]}" ] || { echo "fetch_debs: only $n of ${#PKGS[@]} packages of $list in $into" >&2; exit 1; }
  echo "fetch_debs: $n packages of $list, $(du -sh "$into" | cut -f1) in $into"
}
fetch "$LIST" "$DIR"
fetch scripts/gpu/fallback-packages.txt "$DIR/fallback"

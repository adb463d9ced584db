#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet (idempotent; sudo when not root).
# Usage: scripts/apt_install.sh PKG...
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "apt_install: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"

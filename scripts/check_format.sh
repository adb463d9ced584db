#!/usr/bin/env bash
# Check that every C/C++/CUDA source of ours is clang-formatted (.clang-format at the top).
# Usage: scripts/check_format.sh [--fix]. Exit 0 clean, 1 unformatted files, 77 no clang-format 14.
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format}
if ! command -v "$CF" >/dev/null; then
  echo "check_format: $CF not found (apt-get install clang-format): skipped"; exit 77
fi
# Formatting differs between clang-format releases; the tree is kept in version 14's (Debian 12).
major=$("$CF" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$major" != "14" ]; then
  echo "check_format: $CF is version $major, the tree is formatted with 14: skipped"; exit 77
fi
mapfile -t files < <(find app lib plugins tests -type f \
  \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
if [ "${1:-}" = "--fix" ]; then
  "$CF" -i "${files[@]}"; echo "check_format: formatted ${#files[@]} files"; exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CF" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} of ${#files[@]} files are not clang-formatted:"
  printf '  %s\n' "${bad[@]}"
  echo "fix with: scripts/check_format.sh --fix"
  exit 1
fi
echo "check_format: ${#files[@]} files clean"

#!/usr/bin/env bash
# The planner's files depend in one direction (docs/planner.md "How the planner is built"): a file
# of lib/plan includes only plan/ headers of a lower layer (or its own header). Fails naming the climb.
# usage: tests/plan/check_plan_layers.sh [SOURCE_DIR]
set -u
cd "${1:-$(dirname "$0")/../..}/lib/plan" || exit 2
# layer of each file: planner.h (the module's public types) at the bottom; planner.cpp (make_plan)
# and describe.cpp (the report) at the top
declare -A layer=([planner.h]=0 [hardware]=1 [long_seq]=1 [comm_model]=1 [cost]=2 [advice]=3
  [choose]=4 [modes]=5 [pass]=6 [gap]=7 [planner.cpp]=8 [describe]=8)
rank() { # file name -> layer
  local f=$1
  [ -n "${layer[$f]:-}" ] && { echo "${layer[$f]}"; return; }
  echo "${layer[${f%.*}]:--1}"
}
bad=0
for f in *.h *.cpp; do
  r=$(rank "$f")
  if [ "$r" -lt 0 ]; then echo "lib/plan/$f: not in this check's layer table: add it"; bad=1; continue; fi
  while read -r inc; do
    [ "$inc" = "${f%.*}.h" ] && continue # its own header
    ri=$(rank "$inc")
    if [ "$ri" -lt 0 ] || [ "$ri" -ge "$r" ]; then
      echo "lib/plan/$f (layer $r) includes plan/$inc (layer $ri): a climb; move the code down or the include up"
      bad=1
    fi
  done < <(sed -n 's|^#include "plan/\([a-z_]*\.h\)".*|\1|p' "$f")
done
[ "$bad" = 0 ] && echo "lib/plan: every include goes down a layer"
exit "$bad"

#!/usr/bin/env bash
# Compiles every CUDA source of the project (.cu: lib/kernels, lib/device, plugins, tests) with the
# CUDA 12.4 compiler and headers (make_toolkit.sh) and -Werror, exactly as CMake configures it for
# sm_80 and sm_90: the floor of the CUDA versions we support, beside CI's CUDA 13 build. Compiles
# only; nothing is linked or run. Host sources are not built (none includes a CUDA header).
# Usage: scripts/cuda12/compile_check.sh [BUILD_DIR]   (default build-cuda12)
#   SOF_CUDA12_TOOLKIT: the toolkit folder (default ~/.cache/superoffload/cuda-12.4)
#   SOF_CUDA12_ARCHS:   CMAKE_CUDA_ARCHITECTURES (default "80;90")
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-cuda12}
TK=${SOF_CUDA12_TOOLKIT:-$HOME/.cache/superoffload/cuda-12.4}
ARCHS=${SOF_CUDA12_ARCHS:-80;90}
scripts/cuda12/make_toolkit.sh "$TK"
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSOF_CUDA=ON -DSOF_WERROR=ON \
  -DCMAKE_CUDA_COMPILER="$TK/bin/nvcc" -DCUDAToolkit_ROOT="$TK" -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" \
  >"$BUILD/sof-configure.log" 2>&1 || { tail -30 "$BUILD/sof-configure.log"; exit 1; }
grep -q "CUDA=ON" "$BUILD/sof-configure.log" || { echo "compile_check: CUDA is not on"; exit 1; }
# the .cu entries of compile_commands.json (one per object), nproc at a time
/usr/bin/python3 - "$BUILD" "$(nproc)" <<'PY'
import json, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
build, jobs = sys.argv[1], int(sys.argv[2])
seen, cmds = set(), []
for e in json.load(open(f"{build}/compile_commands.json")):
    if e["file"].endswith(".cu") and e["command"] not in seen:
        seen.add(e["command"])
        cmds.append(e)
def run(e):
    t0 = time.time()
    p = subprocess.run(e["command"], shell=True, cwd=e["directory"], capture_output=True, text=True)
    return e["file"], p.returncode, p.stdout + p.stderr, time.time() - t0
failed = 0
with ThreadPoolExecutor(jobs) as ex:
    for f, rc, out, s in ex.map(run, cmds):
        print(f"{'ok  ' if rc == 0 else 'FAIL'} {s:6.1f} s  {f}", flush=True)
        if rc != 0:
            failed += 1
            print(out)
print(f"compile_check: {len(cmds) - failed} of {len(cmds)} CUDA sources compiled (nvcc 12.4, -Werror)")
sys.exit(1 if failed else 0)
PY

#!/usr/bin/env bash
# Run HERE (the 2-core development machine: x86-64, Debian 12, CUDA 13, no GPU): builds exactly
# what the GPU checks run (Release, sm_90) and packs it into a bundle that a lent GPU machine runs
# without building: stripped binaries and plugins, the runtime .debs, the list of GPU tests taken
# from ctest, the benchmark decks' data and (when built) llm.c's trainer. scripts/gpu/run_bundle.sh
# runs it THERE; scripts/gpu/README.md has the one-step recipe (the exact device-tool call).
# Usage: scripts/gpu/make_bundle.sh [OUT]   (default OUT: .gpu-bundle in this checkout)
#   BUILD=dir   the build folder to use (default: build; configured here if it is not yet)
#   OUT must be a git-ignored folder of the checkout the device tool sends (a helper working in
#   another worktree gives the session checkout's folder: that checkout is what travels).
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$(pwd -P)
OUT=${1:-$SRC/.gpu-bundle}
BUILD=${BUILD:-build}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-/work}
# ccache where it is installed, none where it is not (a launcher that is missing fails CMake's
# compiler checks with a misleading "Could NOT find MPI" and stays in the cache): always given on
# the command line, so a cache written on a machine with ccache is corrected too
CCACHE=$(command -v ccache || true)
LAUNCH=()
for lang in C CXX CUDA; do
  v=CMAKE_${lang}_COMPILER_LAUNCHER
  LAUNCH+=("-D$v=${!v-$CCACHE}")
done

# Release with CUDA (sm_90 is the project's default architecture); the configure step also picks
# up tests added since the last one
type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
[ "$type" = Release ] || [ ! -f "$BUILD/CMakeCache.txt" ] ||
  { echo "make_bundle: $BUILD is a '$type' build; use a Release one (BUILD=...)" >&2; exit 1; }
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSOF_CUDA=ON "${LAUNCH[@]}" \
  >"$BUILD/make_bundle.configure.log" 2>&1 ||
  { tail -20 "$BUILD/make_bundle.configure.log"; exit 1; }
grep -q "superoffload: CUDA=ON" "$BUILD/make_bundle.configure.log" ||
  { echo "make_bundle: $BUILD is not a CUDA build" >&2; exit 1; }
BIN=$(cd "$BUILD" && pwd -P)
MPIEXEC=$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$BUILD/CMakeCache.txt")

# the GPU tests as ctest registers them; their executables are the targets to build. ctest
# leaves out the command of a test whose executable is not built yet (a fresh build folder), so
# the executables are read from the add_test lines of the CTestTestfile.cmake files instead.
json=$(ctest --test-dir "$BUILD" -L 'gpu|cuda' --show-only=json-v1)
mapfile -t EXES < <(python3 -c '
import json, os, re, sys
bindir = sys.argv[1]
bins = os.path.realpath(os.path.join(bindir, "bin"))
names = {t["name"] for t in json.loads(sys.stdin.read())["tests"]}
seen = set()
for root, _, files in os.walk(bindir):
    if "CTestTestfile.cmake" not in files:
        continue
    for line in open(os.path.join(root, "CTestTestfile.cmake")):
        m = re.match(r"add_test\(\[=\[(.*?)\]=\] (.*)\)$", line.strip())
        if not m or m.group(1) not in names:
            continue
        for a in re.findall(r"\"([^\"]*)\"", m.group(2)):
            if os.path.realpath(os.path.dirname(a)) == bins and a not in seen:
                seen.add(a); print(os.path.basename(a))
if not seen:
    sys.exit("make_bundle: no GPU test executable found in the CTestTestfile.cmake files of " + bindir)
' "$BIN" <<<"$json")
[ "${#EXES[@]}" -gt 0 ] || exit 1
TARGETS=(superoffload cpu_adam gpu_adam bench_gpu_adam bench_cuda_device "${EXES[@]}")
mapfile -t TARGETS < <(printf '%s\n' "${TARGETS[@]}" | sort -u)
echo "make_bundle: building ${TARGETS[*]}"
cmake --build "$BUILD" -j "${JOBS:-2}" --target "${TARGETS[@]}" >"$BUILD/make_bundle.log" 2>&1 ||
  { grep -E "error|Error" "$BUILD/make_bundle.log" | head -20; exit 1; }

rm -rf "${OUT:?}/bin" "$OUT/plugins" "$OUT/tests.tsv" "$OUT/manifest.txt"
mkdir -p "$OUT/bin" "$OUT/plugins"
for t in "${TARGETS[@]}"; do
  case $t in
  cpu_adam | gpu_adam) cp "$BIN/plugins/lib$t.so" "$OUT/plugins/" ;;
  *) cp "$BIN/bin/$t" "$OUT/bin/" ;;
  esac
done
strip --strip-unneeded "$OUT"/bin/* "$OUT"/plugins/*.so

# the commands again, now that every executable exists (ctest resolves them only then)
json=$(ctest --test-dir "$BUILD" -L 'gpu|cuda' --show-only=json-v1)

# tests.tsv: name, stage (scripts/gpu/tests.tsv: every GPU test must be listed there, in the
# order the session runs them), timeout (s), skip code, working directory, environment (space
# separated KEY=VALUE, or - for none), command (shell words); paths as @BIN@ (this build folder),
# @SRC@ (this checkout), @MPIEXEC@; python3 from PATH
python3 -c '
import json, shlex, sys
src, bindir, mpiexec, plan_file = sys.argv[1:5]
d = json.loads(sys.stdin.read())
plan = []  # (name, stage) in the session order
for line in open(plan_file):
    if line.strip() and not line.startswith("#"):
        f = line.rstrip("\n").split("\t")
        plan.append((f[0], f[1]))
tests = {t["name"]: t for t in d["tests"]}
missing = sorted(set(tests) - {n for n, _ in plan})
stale = [n for n, _ in plan if n not in tests]
if missing or stale:
    sys.exit("make_bundle: scripts/gpu/tests.tsv is not the list of GPU tests: "
             + ("missing " + " ".join(missing) + "; " if missing else "")
             + ("no such GPU test " + " ".join(stale) if stale else ""))
def sub(a):
    if a.endswith("/python3"): return "python3"
    if a == mpiexec: return "@MPIEXEC@"
    return a.replace(bindir, "@BIN@").replace(src, "@SRC@")
for name, stage in plan:
    t = tests[name]
    p = {x["name"]: x["value"] for x in t.get("properties", [])}
    env = " ".join(p.get("ENVIRONMENT", [])) or "-"  # never empty: bash read joins empty fields
    wd = sub(p.get("WORKING_DIRECTORY", bindir))
    if "command" not in t:
        sys.exit("make_bundle: ctest finds no executable for " + name + " after the build")
    cmd = shlex.join(sub(a) for a in t["command"])
    print("\t".join([name, stage, str(int(p.get("TIMEOUT", 600))),
                     str(p.get("SKIP_RETURN_CODE", 77)), wd, env, cmd]))
' "$SRC" "$BIN" "$MPIEXEC" scripts/gpu/tests.tsv <<<"$json" >"$OUT/tests.tsv"

bash scripts/gpu/fetch_debs.sh "$OUT/debs" scripts/gpu/runtime-packages.txt >/dev/null

# llm.c's trainer, when scripts/bench/llmc_peer.sh built it here (the peer of issue 17 section 6)
if [ -x .peer/llm.c/train_gpt2cu ]; then
  mkdir -p "$OUT/llmc" && cp .peer/llm.c/train_gpt2cu "$OUT/llmc/" && strip "$OUT/llmc/train_gpt2cu"
fi

{
  echo "src=$SRC"
  echo "bin=$BIN"
  echo "commit=$(git rev-parse HEAD)$(git diff --quiet HEAD -- lib app plugins tests || echo ' (+ uncommitted changes)')"
  echo "built=$(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m), $(nvcc --version | tail -1)"
  echo "targets=${TARGETS[*]}"
} >"$OUT/manifest.txt"
echo "make_bundle: $OUT: $(du -sh "$OUT" | cut -f1) ($(du -sh "$OUT/bin" | cut -f1) binaries, $(du -sh "$OUT/debs" | cut -f1) debs), $(wc -l <"$OUT/tests.tsv") GPU tests"
cat "$OUT/manifest.txt"

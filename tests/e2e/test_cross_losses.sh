#!/usr/bin/env bash
# The main job (inputs/tiny.yaml, first STEPS steps) built for another architecture and run under
# its emulator (a cross build: cmake/aarch64-linux-gnu.cmake) against the native x86-64 program:
# every step's training loss and every validation loss within REL relative. Not bitwise: OpenBLAS's
# sgemm kernels and the FMA contraction of the aarch64 compiler sum in other orders (~1e-7 relative
# per product), which Adam carries forward; REL is the fp32 bound test_train_cuda uses for the same
# reason (CUDA against the CPU twins over 20 steps), and a real error (a wrong op, a lost step)
# moves the loss by > 1e-2.
# Usage: test_cross_losses.sh CROSS_BIN NATIVE_BIN SOURCE_DIR SCRATCH STEPS REL (SOF_EXEC_PREFIX set)
set -euo pipefail
cross=$1 native=$2 src=$3 dir=$4 steps=$5 rel=$6
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
source "$src/tests/e2e/launch.sh"
cross=$(sof_launch_setup "$cross" "$dir")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { # run NAME BIN
  local t0=$SECONDS
  "$2" train "$src/inputs/tiny.yaml" --set train.steps="$steps" --set train.eval_every=$(( steps < 20 ? 2 : 10 )) \
    --set train.eval_batches=2 --set runtime.out_dir="$dir/$1" --set train.checkpoint_dir= --set train.checkpoint_every=0 \
    >"$dir/$1.log" 2>&1 || { tail -20 "$dir/$1.log"; echo "FAIL: $1 run"; exit 1; }
  echo "$1: $(grep -m1 'MPI:' "$dir/$1.log" | sed 's/.*(//') $((SECONDS - t0)) s"
}
run native "$native"
run cross "$cross"
# the aarch64 program trains with its own plugin (grace_adam, SVE), the native one with cpu_adam
grep -m1 "engine: optimizer" "$dir/cross.log"
grep -q "engine: optimizer grace_adam" "$dir/cross.log" || { echo "FAIL: the cross run did not use grace_adam"; exit 1; }
/usr/bin/python3 - "$dir/native/metrics.jsonl" "$dir/cross/metrics.jsonl" "$rel" "$steps" <<'PY'
import json, sys
def load(p):
    rows = [json.loads(l) for l in open(p) if l.strip()]
    return ({r["step"]: r["loss"] for r in rows if r.get("kind") == "step"},
            {r["step"]: r["val_loss"] for r in rows if r.get("kind") == "eval"})
(nt, nv), (ct, cv) = load(sys.argv[1]), load(sys.argv[2])
rel, steps = float(sys.argv[3]), int(sys.argv[4])
if len(nt) != steps or sorted(nt) != sorted(ct) or sorted(nv) != sorted(cv) or not nv:
    sys.exit(f"FAIL: steps differ: native {len(nt)} train / {len(nv)} val, cross {len(ct)} / {len(cv)}")
worst, bad = 0.0, []
for kind, a, b in (("train", nt, ct), ("val", nv, cv)):
    for s in sorted(a):
        d = abs(a[s] - b[s]) / abs(a[s])
        worst = max(worst, d)
        if d > rel:
            bad.append(f"{kind} loss at step {s}: native {a[s]!r}, cross {b[s]!r} ({d:.2e} relative)")
print(f"{len(nt)} train and {len(nv)} val losses, max relative difference {worst:.3e} (bound {rel})")
print(f"first/last train loss: native {nt[min(nt)]:.6f} -> {nt[max(nt)]:.6f}, "
      f"cross {ct[min(ct)]:.6f} -> {ct[max(ct)]:.6f}")
if bad:
    sys.exit("FAIL:\n" + "\n".join(bad[:10]))
PY

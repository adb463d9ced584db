#!/usr/bin/env bash
# The slurm/ recipes for real: a one-node Slurm on localhost (scripts/slurm/local_cluster.sh) runs
# `superoffload topo` and `train` under srun and slurm/generic.sbatch, compared with mpirun bitwise.
#
# Usage: test_slurm.sh MODE EXE   (MODE: run | requeue | sites; EXE: build/bin/superoffload)
#   run      srun -n 2 topo: each rank's Slurm binding == topo's placement; srun train and an
#            `sbatch --wait slurm/generic.sbatch` train: checkpoint files and per-step losses equal
#            the mpirun run's bitwise, every rank binds as topo says
#   requeue  generic.sbatch gets its early SIGUSR1 mid-run (as --signal=B:USR1@300 sends it): the
#            ranks checkpoint and exit 75, the job requeues itself (then, with SOF_RESUBMIT=sbatch,
#            submits a successor), resumes (train.resume: auto) and ends with the checkpoint of
#            the uninterrupted mpirun run, bitwise
#   sites    slurm/alps-gh200.sbatch and deltaai-gh200.sbatch without their SITE lines, scaled
#            down to this node: they train and bind as topo plans, equal to mpirun bitwise
# Exit 77 (ctest SKIP_RETURN_CODE) with a message where Slurm cannot start here (not root, missing
# packages, daemons that do not come up). The daemons are always stopped (EXIT trap; each one also
# ends by itself after SOF_SLURM_LIFETIME seconds should this script be SIGKILLed).
set -euo pipefail

MODE=${1:?usage: test_slurm.sh run|requeue|sites EXE}
EXE=$(cd "$(dirname "${2:?usage: test_slurm.sh run|requeue|sites EXE}")" && pwd)/$(basename "$2")
export EXE # the recipes run $EXE (sbatch passes the environment on)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# ranks of the training runs (ZeRO-3 over the data-parallel ranks; SOF_SLURM_TRAIN_RANKS=1 for one)
TRAIN_RANKS=${SOF_SLURM_TRAIN_RANKS:-2}
CPUS=$(nproc)

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}
ok() { echo "ok   $*"; }

[ "$(id -u)" -eq 0 ] || skip "slurmd must run as root to launch jobs (run as root, as CI does)"
[ -x "$EXE" ] || fail "$EXE not built (cmake --build build --target superoffload cpu_adam)"
command -v mpirun >/dev/null || fail "mpirun not found (openmpi-bin)"
[ "$CPUS" -ge 2 ] || skip "needs 2 CPUs for 2 ranks, this machine has $CPUS"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sof-slurm.XXXXXX")
chmod 0755 "$WORK" # munged wants the directories above its socket searchable by all
CLUSTER=$WORK/cluster
export SOF_SLURM_LIFETIME=${SOF_SLURM_LIFETIME:-600}
cleanup() {
  local rc=$? pids f
  trap - EXIT INT TERM
  pids=$(cat "$CLUSTER"/run/*.pid 2>/dev/null || true)
  if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -d "$CLUSTER/log" ]; then
    for f in "$CLUSTER"/log/*.log; do
      echo "--- $f (last 20 lines)"
      tail -20 "$f"
    done
  fi
  "$SRC/scripts/slurm/local_cluster.sh" stop "$CLUSTER" || true
  for p in $pids; do # the daemons must be gone (zombies awaiting init's reaping count as gone)
    if [ -r "/proc/$p/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status"; then
      echo "FAIL: daemon pid $p still runs after stop"
      rc=1
    fi
  done
  if [ $rc -eq 0 ] || [ $rc -eq 77 ]; then rm -rf "$WORK"; else echo "(files kept in $WORK)"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$SRC/scripts/slurm/local_cluster.sh" start "$CLUSTER" # exits 77 itself when Slurm cannot start
export SLURM_CONF=$CLUSTER/etc/slurm.conf
cd "$SRC"

# the deck: tiny GPT-2, a few steps, one validation batch
STEPS=${SOF_SLURM_STEPS:-3}
# requeue: the job holds after step 2 (debug.hold_for_stop) until its signal has arrived, so the
# test does not race the machine's speed (the signal crosses slurmctld, slurmd, the batch shell,
# srun and slurmstepd: it arrived after the last of 24 steps in 4 of 5 runs on one machine)
[ "$MODE" = requeue ] && STEPS=${SOF_SLURM_STEPS:-6}
deck_args() { # deck_args OUT_DIR: the deck and its overrides in the array DECK
  DECK=(inputs/tiny.yaml --set train.steps="$STEPS" --set train.eval_batches=1
    --set train.eval_every=1000 --set runtime.out_dir="$1" --set train.checkpoint_dir="$1/ckpt")
}

files_of() { find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | tr '\n' ' '; }

# same_run A B: the newest checkpoints of runs A and B hold the same bytes (every file but the
# deck copy, which names the run's own directories; the manifest without its deck/self checksums)
# and the per-step losses, grad norms, learning rates and validation losses are equal
same_run() {
  local a=$1 b=$2 sa sb f da db
  da=("$a"/ckpt/step_*) # sorted by the glob: the last is the newest step
  db=("$b"/ckpt/step_*)
  sa=${da[-1]}
  sb=${db[-1]}
  if [ ! -d "$sa" ] || [ ! -d "$sb" ]; then fail "no checkpoint in $a/ckpt or $b/ckpt"; fi
  [ "$(basename "$sa")" = "$(basename "$sb")" ] || fail "newest checkpoints differ: $sa vs $sb"
  [ "$(files_of "$sa")" = "$(files_of "$sb")" ] || fail "checkpoint files differ: $sa vs $sb"
  for f in "$sa"/*; do
    case $(basename "$f") in
    deck.yaml) ;;
    manifest.json)
      python3 - "$f" "$sb/manifest.json" <<'EOF' ||
import json, sys
drop = {"deck", "manifest_checksum"}
a, b = ({k: v for k, v in json.load(open(p)).items() if k not in drop} for p in sys.argv[1:3])
for k in sorted(set(a) | set(b)):
    if a.get(k) != b.get(k): print("  %s: %s vs %s" % (k, a.get(k), b.get(k)))
sys.exit(a != b)
EOF
        fail "manifests differ: $f vs $sb/manifest.json"
      ;;
    *) cmp "$f" "$sb/$(basename "$f")" || fail "$(basename "$f") differs: $sa vs $sb" ;;
    esac
  done
  python3 - "$a/metrics.jsonl" "$b/metrics.jsonl" <<'EOF' || fail "metrics of $a and $b differ"
import json, sys
keys = ("loss", "val_loss", "grad_norm", "lr", "skipped", "clipped")
def series(path):  # (kind, step) -> values; a resumed run repeats steps: the last line counts
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") in ("step", "eval"):
            out[(r["kind"], r["step"])] = tuple(r.get(k) for k in keys)
    return out
a, b = series(sys.argv[1]), series(sys.argv[2])
# every step in both; evaluations where both made one (a run evaluates where it starts, so a
# resumed run has one more)
keys = {k for k in set(a) | set(b) if k[0] == "step"}
evals = {k for k in set(a) & set(b) if k[0] == "eval"}
bad = [k for k in sorted(keys | evals) if a.get(k) != b.get(k)]
for k in bad: print("  %s: %s vs %s" % (k, a.get(k), b.get(k)))
if not keys or not evals or bad:
    sys.exit(1 if bad else "  no steps or no common evaluation")
print("     %d steps and %d evaluations equal" % (len(keys), len(evals)))
EOF
  ok "$(basename "$b") == $(basename "$a") bitwise ($(basename "$sa"): $(files_of "$sa"))"
}

# reference: the same deck under mpirun
mpirun_train() { # mpirun_train OUT_DIR
  deck_args "$1"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
    mpirun -np "$TRAIN_RANKS" --oversubscribe "$EXE" train "${DECK[@]}" >"$1.log" 2>&1 ||
    fail "mpirun train failed: $(tail -5 "$1.log")"
  ok "mpirun -np $TRAIN_RANKS train ($STEPS steps)"
}

# placement lines by rank from `srun -l` output: "R: placement: local rank r/n: ... (PUs X)..."
placement_pus() { sed -n "s/^ *$1: placement: .*(PUs \([0-9,-]*\)).*/\1/p" "$2"; }
running_pus() { sed -n "s/^ *$1: (dry run: .*running on PUs \([0-9,-]*\) now)/\1/p" "$2"; }

# check_binding N CPT LOG: `srun -n N` topo output in LOG: rank r is local rank r/N, Slurm bound it
# to exactly the PUs topo plans for it, and no two ranks share a PU
check_binding() {
  local n=$1 log=$3 r plan run seen=""
  for r in $(seq 0 $((n - 1))); do
    grep -q "^ *$r: placement: local rank $r/$n:" "$log" ||
      fail "rank $r is not local rank $r/$n in topo's view: $(grep "^ *$r: placement" "$log")"
    plan=$(placement_pus "$r" "$log")
    run=$(running_pus "$r" "$log")
    if [ -z "$plan" ] || [ "$plan" != "$run" ]; then
      fail "rank $r: topo plans PUs '$plan', Slurm bound it to '$run'"
    fi
    case ",$seen," in *",$plan,"*) fail "PUs $plan given to two ranks" ;; esac
    seen="$seen,$plan"
  done
  ok "srun -n $n: every rank bound by Slurm to the PUs topo plans for it ($seen)"
}

# same_placement SBATCH_OUT TOPO_LOG: the `placement:` lines a recipe printed (its topo step) are
# the ones `srun -l topo` printed with the same layout
same_placement() {
  diff <(grep '^placement: ' "$1" | sort) <(sed -n 's/^ *[0-9]*: \(placement: \)/\1/p' "$2" | sort) ||
    fail "$1: the recipe's topo step shows other placements than srun topo"
}

# train_bound_as_planned LOG CMD...: run CMD (a training srun/sbatch; output to LOG); then each
# training rank's `rank r bind:` line in $TRAIN_LOG must give topo's placement for local rank r
# ($TOPO_LOG) and the PUs the rank runs on once bound, which the rank reads back from the kernel
# itself (no sampling of processes from outside: a fast rank could end between two samples)
train_bound_as_planned() {
  local log=$1 rc=0 r want got line seen=""
  shift
  "$@" >"$log" 2>&1 || rc=$?
  [ $rc -eq 0 ] || return $rc
  for r in $(seq 0 $((TRAIN_RANKS - 1))); do
    line=$(grep -E "rank $r bind: local rank $r/" "$TRAIN_LOG" | head -1)
    [ -n "$line" ] || fail "training rank $r logged no 'rank $r bind:' line"
    want=$(sed -n "s/^ *$r: placement: //p" "$TOPO_LOG")
    got=$(echo "$line" | sed 's/.*bind: //; s/; running on PUs .*//')
    [ "$want" = "$got" ] || fail "rank $r logged binding '$got', topo plans '$want'"
    want=$(placement_pus "$r" "$TOPO_LOG")
    got=$(echo "$line" | sed -n 's/.*; running on PUs \([0-9,-]*\)$/\1/p')
    [ -n "$got" ] && [ "$got" = "$want" ] ||
      fail "training rank $r runs on PUs '$got', topo plans '$want'"
    seen="$seen $r:$got"
  done
  ok "training ranks run on the PUs topo plans ($seen )"
}

CPT=$((CPUS / TRAIN_RANKS)) # cores per training rank
[ "$CPT" -ge 1 ] || CPT=1

run_mode() {
  echo "     srun --mpi=list: $(srun --mpi=list 2>&1 | tr -s '\n\t ' ' ')"
  # 1. topo on 2 ranks, one core each
  timeout 60 srun -l -n 2 --ntasks-per-node=2 --cpus-per-task=1 "$EXE" topo >"$WORK/topo2.log" 2>&1 ||
    fail "srun -n 2 topo: $(cat "$WORK/topo2.log")"
  check_binding 2 1 "$WORK/topo2.log"

  # 2. train under mpirun (reference), srun and sbatch
  mpirun_train "$WORK/mpirun"
  timeout 60 srun -l -n "$TRAIN_RANKS" --ntasks-per-node="$TRAIN_RANKS" --cpus-per-task="$CPT" \
    "$EXE" topo >"$WORK/topo_train.log" 2>&1 || fail "srun topo: $(cat "$WORK/topo_train.log")"
  check_binding "$TRAIN_RANKS" "$CPT" "$WORK/topo_train.log"
  # a plain `srun -n N` (no --ntasks-per-node: train takes the local size from MPI)
  deck_args "$WORK/srun"
  TOPO_LOG=$WORK/topo_train.log TRAIN_LOG=$WORK/srun.log train_bound_as_planned "$WORK/srun.log" \
    timeout 300 srun -l -n "$TRAIN_RANKS" --cpus-per-task="$CPT" "$EXE" train "${DECK[@]}" ||
    fail "srun train failed: $(tail -5 "$WORK/srun.log")"
  ok "srun -n $TRAIN_RANKS train ($STEPS steps)"
  same_run "$WORK/mpirun" "$WORK/srun"

  # generic.sbatch prints topo's placement per rank, then trains: the same binding
  deck_args "$WORK/sbatch"
  TOPO_LOG=$WORK/topo_train.log TRAIN_LOG=$WORK/sbatch.out train_bound_as_planned /dev/null \
    timeout 300 sbatch --wait --ntasks-per-node="$TRAIN_RANKS" --cpus-per-task="$CPT" \
    --output="$WORK/sbatch.out" slurm/generic.sbatch "${DECK[@]}" ||
    fail "sbatch --wait slurm/generic.sbatch failed: $(tail -15 "$WORK/sbatch.out")"
  grep -q "training finished" "$WORK/sbatch.out" || fail "generic.sbatch did not report the end"
  [ "$(grep -c "OK: bound to NUMA node" "$WORK/sbatch.out")" -eq "$TRAIN_RANKS" ] ||
    fail "generic.sbatch: numa_check did not find every rank on its node: $(grep -E 'OK|WARN' "$WORK/sbatch.out")"
  ok "sbatch --wait slurm/generic.sbatch ($TRAIN_RANKS ranks x $CPT cores)"
  same_placement "$WORK/sbatch.out" "$WORK/topo_train.log"
  same_run "$WORK/mpirun" "$WORK/sbatch"
}

job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }

# wait_job JOBID: until it has ended (any final state); prints the state
wait_job() {
  local state=""
  for _ in $(seq 1 1500); do
    state=$(job_state "$1")
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
    sleep 0.2
  done
  echo "$state"
}

# stop_and_continue HOW: generic.sbatch with SOF_RESUBMIT=HOW (requeue: same job; sbatch: a new
# job) gets the early SIGUSR1 at step 2; the chain must end with the uninterrupted run's state
stop_and_continue() {
  local how=$1 jid next state out=$WORK/$1.out
  deck_args "$WORK/$how"
  # the ranks hold after step 2 until the stop is agreed (a later step never holds: the resumed
  # run starts at step 3)
  jid=$(SOF_RESUBMIT=$how sbatch --parsable --ntasks-per-node="$TRAIN_RANKS" \
    --cpus-per-task="$CPT" --output="$out" slurm/generic.sbatch "${DECK[@]}" \
    --set debug.hold_for_stop=2) || fail "sbatch slurm/generic.sbatch failed"
  # the early signal once training holds at step 2 (what --signal=B:USR1@300 does 300 s before
  # the limit); the batch shell forwards it to srun only once the training step runs
  for _ in $(seq 1 1200); do
    grep -q "holding after step 2 " "$out" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "holding after step 2 " "$out" || fail "job $jid did not hold at step 2: $(tail -5 "$out")"
  scancel --batch --signal=USR1 "$jid"
  ok "job $jid: SIGUSR1 to the batch shell while it holds after step 2 of $STEPS"
  state=$(wait_job "$jid")
  [ "$state" = COMPLETED ] || fail "job $jid ended $state: $(tail -15 "$out")"
  grep -q "stopped after step 2;" "$out" || fail "job $jid: no stop after step 2: $(tail -15 "$out")"
  if [ "$how" = requeue ]; then
    grep -q "job $jid requeued (restart 1)" "$out" || fail "job $jid was not requeued: $(tail -15 "$out")"
    grep -q "sbatch $jid\] job $jid: .*restart 1, deck" "$out" ||
      fail "job $jid did not run again after its requeue"
  else
    next=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$out" | tail -1)
    if [ -z "$next" ] || [ "$next" = "$jid" ]; then
      fail "job $jid did not submit a successor: $(tail -15 "$out")"
    fi
    state=$(wait_job "$next")
    [ "$state" = COMPLETED ] || fail "successor job $next ended $state: $(tail -15 "$out")"
    grep -q "sbatch $next\] training finished" "$out" || fail "job $next did not finish the run"
  fi
  ok "SOF_RESUBMIT=$how: checkpoint, exit 75, continued ($(grep -c '\] job [0-9]*: ' "$out") runs)"
  grep -q "resume: .*step_0*[1-9]" "$out" || fail "the second run did not resume from a checkpoint"
  # every file and the whole manifest (its skips/rollbacks counters go on across a resume)
  same_run "$WORK/mpirun" "$WORK/$how"
}

requeue_mode() {
  mpirun_train "$WORK/mpirun"
  stop_and_continue requeue
  stop_and_continue sbatch
}

sites_mode() {
  # the Alps and DeltaAI recipes, their SITE lines (account, partition, uenv) removed and their
  # node shape scaled down on the command line: same training, same binding as topo plans
  mpirun_train "$WORK/mpirun"
  timeout 60 srun -l -n "$TRAIN_RANKS" --ntasks-per-node="$TRAIN_RANKS" --cpus-per-task="$CPT" \
    "$EXE" topo >"$WORK/topo_train.log" 2>&1 || fail "srun topo: $(cat "$WORK/topo_train.log")"
  check_binding "$TRAIN_RANKS" "$CPT" "$WORK/topo_train.log"
  local site
  for site in alps-gh200 deltaai-gh200; do
    sed '/# SITE/d' "slurm/$site.sbatch" >"$WORK/$site.sbatch"
    deck_args "$WORK/$site"
    TOPO_LOG=$WORK/topo_train.log TRAIN_LOG=$WORK/$site.out train_bound_as_planned /dev/null \
      timeout 300 sbatch --wait --nodes=1 --ntasks-per-node="$TRAIN_RANKS" \
      --cpus-per-task="$CPT" --gpus-per-node="$TRAIN_RANKS" --output="$WORK/$site.out" \
      "$WORK/$site.sbatch" "${DECK[@]}" ||
      fail "sbatch --wait slurm/$site.sbatch failed: $(tail -15 "$WORK/$site.out")"
    grep -q "training finished" "$WORK/$site.out" || fail "$site.sbatch did not report the end"
    [ "$(grep -c "OK: bound to NUMA node" "$WORK/$site.out")" -eq "$TRAIN_RANKS" ] ||
      fail "$site.sbatch: numa_check did not find every rank on its node"
    ok "sbatch --wait slurm/$site.sbatch ($TRAIN_RANKS ranks x $CPT cores)"
    same_placement "$WORK/$site.out" "$WORK/topo_train.log"
    same_run "$WORK/mpirun" "$WORK/$site"
  done
}

case $MODE in
run) run_mode ;;
requeue) requeue_mode ;;
sites) sites_mode ;;
*) fail "unknown mode '$MODE' (run, requeue or sites)" ;;
esac
echo "PASS ($MODE)"

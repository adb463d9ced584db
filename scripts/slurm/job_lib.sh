# Shell functions for the sbatch recipes in slurm/ (sourced, not run): a training step that survives
# the time limit (early signal -> checkpoint -> requeue or resubmit, then train.resume: auto).
#
# The contract with `superoffload train` (app/signals.*): the first SIGTERM/SIGINT/SIGUSR1 makes it
# finish the current step, write a checkpoint (when train.checkpoint_dir is set), flush metrics and
# exit with code 75 (SOF_EXIT_STOPPED); a second such signal ends it at once without a checkpoint.
#
# The recipes ask Slurm for `--signal=B:USR1@300`: 300 s before the time limit the batch shell (only
# it, "B:") gets SIGUSR1. sof_train_step forwards it once to its srun, and srun hands it to every
# rank, so each rank sees exactly one signal (Slurm's own SIGTERM at the limit reaches the ranks
# both directly and through srun, which may count as two: hence the early USR1). When the step then
# ends with 75, sof_continue requeues the job (same job id, `scontrol requeue`; needs --requeue) or,
# where the site refuses requeues, submits the same script again with --dependency=afterany; the
# next allocation resumes from the newest checkpoint (train.resume: auto). An exit 75 after a
# SIGTERM that was not announced by USR1 (scancel, or the time limit without --signal) is not
# requeued: the checkpoint is there, resubmit by hand to continue. Nor is a run whose USR1 came
# before its training started (a --time shorter than the lead time plus Slurm's up to 60 s of
# signal resolution would requeue forever).
#
# Variables: SOF_EXIT_STOPPED (75), SOF_MAX_REQUEUES (20: a chain that long stops for good),
# SOF_RESUBMIT (auto|requeue|sbatch|none: how to continue after a stop; auto = requeue, then sbatch).

# shellcheck shell=bash
SOF_EXIT_STOPPED=${SOF_EXIT_STOPPED:-75}
SOF_MAX_REQUEUES=${SOF_MAX_REQUEUES:-20}
SOF_RESUBMIT=${SOF_RESUBMIT:-auto}
SOF_STEP_PID=""
SOF_SIGNAL=""
SOF_TRAINED=""

sof_log() { echo "[$(date -u +%FT%TZ) sbatch ${SLURM_JOB_ID:-?}] $*"; }

# Cray MPICH's environment for a GPU run of the executable $1. MPICH_GPU_SUPPORT_ENABLED=1 (device
# buffers passed to MPI; the engine confirms with a round trip) only where the binary links Cray
# MPICH's GPU transport layer, libmpi_gtl_cuda: with the switch on and the layer missing, Cray
# MPICH aborts inside MPI_Init, before the program can say why. A Cray MPICH binary without it
# gets the switch off and a warning (collectives staged through host memory, slower). A value the
# user set is kept where the layer is linked. MPICH_MAX_THREAD_SAFETY=multiple: the engine's comm
# lane needs MPI_THREAD_MULTIPLE. Other MPI libraries ignore both.
sof_cray_mpich_env() {
  local libs
  libs=$(ldd "$1" 2>/dev/null || true)
  export MPICH_MAX_THREAD_SAFETY=multiple
  if grep -q libmpi_gtl_cuda <<<"$libs"; then
    export MPICH_GPU_SUPPORT_ENABLED="${MPICH_GPU_SUPPORT_ENABLED:-1}"
  elif grep -qi cray <<<"$libs"; then
    export MPICH_GPU_SUPPORT_ENABLED=0
    sof_log "WARNING: $1 links Cray MPICH without its GPU transport layer (libmpi_gtl_cuda):" \
      "collectives staged through host memory; rebuild with the craype-accel-nvidia90 module" \
      "(or the uenv's cray-mpich) for CUDA-aware MPI"
  fi
}

_sof_on_usr1() {
  SOF_SIGNAL=USR1
  if [ -n "$SOF_STEP_PID" ] && kill -0 "$SOF_STEP_PID" 2>/dev/null; then
    sof_log "SIGUSR1 (time limit ahead): asking the ranks to checkpoint and stop"
    kill -USR1 "$SOF_STEP_PID" 2>/dev/null || true
  else
    sof_log "SIGUSR1 (time limit ahead) between steps: the next training step will not start"
  fi
}
_sof_on_term() {
  # Slurm signals the step's tasks itself (scancel, time limit): forwarding would be a second signal
  [ "$SOF_SIGNAL" = USR1 ] || SOF_SIGNAL=TERM
  sof_log "SIGTERM: the ranks stop after their step (Slurm signals them directly)"
}

# from the moment a recipe sources this file: an early USR1 during the preflight steps is kept
# (the training step then does not start, and the job continues in the next allocation)
trap _sof_on_usr1 USR1
trap _sof_on_term TERM

# sof_train_step CMD...: run CMD (an `srun ... superoffload train ...`) in the background so that
# the batch shell can take signals while it runs; returns CMD's exit code.
sof_train_step() {
  local rc=0
  if [ "$SOF_SIGNAL" = USR1 ]; then
    sof_log "not starting '$*': the time limit is near (SIGUSR1 came earlier)"
    return "$SOF_EXIT_STOPPED"
  fi
  SOF_TRAINED=1
  "$@" &
  SOF_STEP_PID=$!
  # `wait` returns early (status > 128) when a trapped signal arrives: wait again until CMD ends
  while :; do
    rc=0
    wait "$SOF_STEP_PID" || rc=$?
    kill -0 "$SOF_STEP_PID" 2>/dev/null || break
  done
  SOF_STEP_PID=""
  return "$rc"
}

# sof_continue RC SCRIPT [ARGS...]: after the training step. RC 75 after the early signal: requeue
# this job (or submit SCRIPT ARGS again); any other RC: exit with it.
sof_continue() {
  local rc=$1 script=$2
  shift 2
  if [ "$rc" -ne "$SOF_EXIT_STOPPED" ]; then
    if [ "$rc" -eq 0 ]; then
      sof_log "training finished"
    else
      sof_log "training failed with exit code $rc"
    fi
    exit "$rc"
  fi
  if [ "$SOF_SIGNAL" != USR1 ]; then
    sof_log "stopped by ${SOF_SIGNAL:-a signal} with a checkpoint (exit $rc); not requeued (scancel" \
      "or time limit without --signal): submit again to resume (train.resume: auto)"
    exit "$rc"
  fi
  if [ -z "$SOF_TRAINED" ]; then
    # Slurm may signal up to 60 s before the asked time: a limit that short repeats forever
    sof_log "SIGUSR1 came before training started: --time is too short for the --signal lead" \
      "time (plus up to 60 s of Slurm's resolution); not continued"
    exit "$rc"
  fi
  # runs so far in this chain: requeues of this job, or resubmissions (SOF_CHAIN, set below)
  local count=${SLURM_RESTART_COUNT:-0}
  [ "${SOF_CHAIN:-0}" -gt "$count" ] && count=$SOF_CHAIN
  if [ "$count" -ge "$SOF_MAX_REQUEUES" ]; then
    sof_log "stopped with a checkpoint after $count requeues/resubmissions" \
      "(SOF_MAX_REQUEUES=$SOF_MAX_REQUEUES): not continued again"
    exit "$rc"
  fi
  case "$SOF_RESUBMIT" in
  none)
    sof_log "stopped with a checkpoint; SOF_RESUBMIT=none: not continuing"
    exit "$rc"
    ;;
  auto | requeue)
    # a requeue ends this run at once with SIGTERM to all its processes, scontrol included, which
    # may die before it reports success: ignore TERM (inherited by scontrol) and ask the job itself
    trap '' TERM
    if scontrol requeue "$SLURM_JOB_ID" || _sof_requeued "$count"; then
      sof_log "checkpoint written; job $SLURM_JOB_ID requeued (restart $((count + 1)));" \
        "the next run resumes from it"
      exit 0
    fi
    if [ "$SOF_RESUBMIT" = requeue ]; then
      sof_log "scontrol requeue failed (job submitted with --no-requeue, or JobRequeue=0 here)"
      exit "$rc"
    fi
    sof_log "scontrol requeue failed: submitting $script again instead"
    ;;
  sbatch) ;;
  *)
    sof_log "SOF_RESUBMIT='$SOF_RESUBMIT' is not one of auto, requeue, sbatch, none"
    exit "$rc"
    ;;
  esac
  local same=()
  _sof_same_shape
  if sbatch --dependency="afterany:$SLURM_JOB_ID" "${same[@]}" "$script" "$@"; then
    sof_log "checkpoint written; resubmitted $script (the new job resumes from it)"
    exit 0
  fi
  sof_log "resubmitting $script failed: submit it again by hand to resume"
  exit "$rc"
}

# _sof_same_shape: sbatch options (into the caller's array `same`) for a job shaped like this one
# (options given on the first sbatch command line are not in the script's #SBATCH lines), and the
# chain count (the caller's `count`) for the next job
_sof_same_shape() {
  local info key val var
  info=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | tr ' ' '\n')
  for key in nodes:SLURM_JOB_NUM_NODES ntasks-per-node:SLURM_NTASKS_PER_NODE \
    cpus-per-task:SLURM_CPUS_PER_TASK gpus-per-task:SLURM_GPUS_PER_TASK \
    gpus-per-node:SLURM_GPUS_PER_NODE partition:SLURM_JOB_PARTITION account:SLURM_JOB_ACCOUNT \
    job-name:SLURM_JOB_NAME; do
    var=${key#*:}
    val=${!var:-}
    [ -n "$val" ] && same+=("--${key%%:*}=$val")
  done
  for key in TimeLimit:time StdOut:output; do
    val=$(echo "$info" | sed -n "s/^${key%%:*}=//p")
    [ -n "$val" ] && [ "$val" != UNLIMITED ] && same+=("--${key#*:}=$val")
  done
  same+=(--open-mode=append "--export=ALL,SOF_CHAIN=$((count + 1))")
}

# _sof_requeued COUNT: this job has been requeued more than COUNT times
_sof_requeued() {
  local n
  n=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | tr ' ' '\n' | sed -n 's/^Restarts=//p')
  [ -n "$n" ] && [ "$n" -gt "$1" ]
}

# sof_script_path: the path the job script was submitted from (sbatch runs a spooled copy as $0)
sof_script_path() {
  local cmd
  cmd=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | tr ' ' '\n' | sed -n 's/^Command=//p')
  echo "${cmd:-$0}"
}

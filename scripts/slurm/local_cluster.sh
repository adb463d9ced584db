#!/usr/bin/env bash
# A one-node Slurm cluster on localhost in a directory of its own (own slurm.conf, munge key and
# socket, state/spool/log dirs and ports; no systemd, no cgroups): for tests and for trying recipes.
#
# Usage: scripts/slurm/local_cluster.sh start DIR   bring up munged, slurmctld, slurmd; wait for idle
#        scripts/slurm/local_cluster.sh stop DIR    cancel jobs, stop the three daemons (always safe)
#        scripts/slurm/local_cluster.sh env DIR     print `export SLURM_CONF=...` for the clients
#
# Needs Debian 12's munge, slurmctld, slurmd and slurm-client (scripts/setup.sh installs them).
# `start` exits 77 (the ctest skip code) with a message when Slurm cannot be started here (missing
# programs, no free port, a daemon that does not come up); its logs stay in DIR/log.
# The daemons run in the foreground as children of the caller's process group (started with `&`,
# pids in DIR/run/*.pid), so a killed test takes them with it; `stop` ends exactly those pids.
#
# Choices for containers: ProctrackType=proctrack/linuxproc (tracks steps through /proc, no
# cgroup), TaskPlugin=task/affinity (binds with sched_setaffinity, no cgroup; SOF_SLURM_TASK_PLUGIN
# =task/none turns binding off), no accounting, MpiDefault=pmix (Open MPI 4.1 of Debian is built
# against PMIx; see docs/running-on-clusters.md). SlurmUser is the calling user (root in CI).
set -euo pipefail

SKIP=77
die_skip() {
  echo "local_cluster: SKIP: $*" >&2
  exit "$SKIP"
}
die() {
  echo "local_cluster: error: $*" >&2
  exit 1
}

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then die "usage: $0 start|stop|env DIR"; fi

free_port() { # a TCP port nobody listens on now (the kernel's pick for port 0)
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

alive() { # pid $1 exists and is not a zombie (orphaned daemons are reaped by init, late)
  [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

stop_pidfile() { # TERM the pid in $1 (if alive), wait up to 10 s, then KILL
  local f=$1 pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  rm -f "$f"
  [ -n "$pid" ] && alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    alive "$pid" || return 0
    sleep 0.1
  done
  echo "local_cluster: pid $pid ($f) ignored SIGTERM for 10 s: SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...: poll every 0.2 s; fail early if a
  local secs=$1 what=$2 i f # daemon of DIR/run died meanwhile
  shift 2
  for i in $(seq 1 $((secs * 5))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    for f in "${dir:-/nonexistent}"/run/*.pid; do
      [ -f "$f" ] || continue
      if ! alive "$(cat "$f")"; then
        echo "local_cluster: $(basename "$f" .pid) exited while waiting for $what" >&2
        return 1
      fi
    done
    sleep 0.2
  done
  echo "local_cluster: $what did not happen within ${secs} s" >&2
  return 1
}

case "$cmd" in
env)
  dir=$(cd "$dir" && pwd)
  echo "export SLURM_CONF=$dir/etc/slurm.conf"
  exit 0
  ;;
stop)
  [ -d "$dir" ] || exit 0
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/etc/slurm.conf" ] && [ -f "$dir/run/slurmctld.pid" ]; then
    export SLURM_CONF=$dir/etc/slurm.conf
    # end running jobs first so that slurmd reaps their steps (proctrack/linuxproc kills them)
    timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null || true
    # shellcheck disable=SC2016 # expanded by the inner bash
    wait_for 10 "job cancellation" bash -c '[ -z "$(squeue -h -o %i 2>/dev/null)" ]' || true
  fi
  stop_pidfile "$dir/run/slurmd.pid"
  stop_pidfile "$dir/run/slurmctld.pid"
  stop_pidfile "$dir/run/munged.pid"
  exit 0
  ;;
start) ;;
*) die "unknown command '$cmd' (start, stop or env)" ;;
esac

# ---- start ----
for p in munged slurmctld slurmd slurmstepd srun sbatch sinfo squeue scancel python3; do
  command -v "$p" >/dev/null 2>&1 ||
    PATH=$PATH:/usr/sbin command -v "$p" >/dev/null 2>&1 ||
    die_skip "'$p' not found (install munge, slurmctld, slurmd, slurm-client: scripts/setup.sh)"
done
export PATH=$PATH:/usr/sbin
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
[ ! -f "$dir/run/slurmctld.pid" ] || die "$dir already has a running cluster (stop it first)"
mkdir -p "$dir"/{etc,munge,state,spool,log,run,tmp}
chmod 0755 "$dir/munge" # munged wants the socket dir searchable by all
user=$(id -un)
host=$(hostname -s)

# munged refuses a socket whose directories are not searchable by all (o+x), up to /
d=$dir
while [ "$d" != / ]; do
  [ "$(($(stat -c %a "$d" | sed 's/^/0/') & 1))" -eq 1 ] ||
    die "munged needs every directory above its socket searchable by all: chmod o+x $d"
  d=$(dirname "$d")
done

# munge: own key (1 KiB random, 0400), socket, pid, seed and log inside DIR/munge
key=$dir/munge/munge.key
if [ ! -s "$key" ]; then
  if command -v mungekey >/dev/null 2>&1; then
    mungekey --create --keyfile="$key" --force
  else
    dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
  fi
  chmod 0400 "$key"
fi
sock=$dir/munge/munge.socket
# SOF_SLURM_LIFETIME=N (seconds): each daemon runs under `timeout N`, so a cluster whose owner was
# SIGKILLed (and never called stop) still goes away by itself
life=()
[ "${SOF_SLURM_LIFETIME:-0}" -gt 0 ] && life=(timeout --foreground -k 5 "$SOF_SLURM_LIFETIME")
"${life[@]}" munged -F --socket="$sock" --key-file="$key" --pid-file="$dir/munge/munged.pid" \
  --seed-file="$dir/munge/munged.seed" --log-file="$dir/log/munged.log" \
  </dev/null >>"$dir/log/munged.out" 2>&1 &
echo $! >"$dir/run/munged.pid"
if ! wait_for 10 "munged socket $sock" test -S "$sock"; then
  cat "$dir/log/munged.out" "$dir/log/munged.log" >&2 2>/dev/null || true
  "$0" stop "$dir"
  die_skip "munged did not start (log above)"
fi

# node shape as slurmd sees it (CPUs, sockets, cores, threads, memory)
node_line=$(slurmd -C | head -1)
shape=$(echo "$node_line" | tr ' ' '\n' |
  grep -E '^(CPUs|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ')
mem=$(echo "$node_line" | tr ' ' '\n' | sed -n 's/^RealMemory=//p')
mem=$((mem * 9 / 10)) # leave slurmd's own margin
ngpu=$(echo "$node_line" | tr ' ' '\n' | sed -n 's/^CPUs=//p') # one "GPU" per CPU
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done

cat >"$dir/etc/slurm.conf" <<EOF
# one-node local cluster written by scripts/slurm/local_cluster.sh (do not edit: regenerated)
ClusterName=sofloc
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${ctld_port}
SlurmdPort=${slurmd_port}
SlurmUser=${user}
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also the wait before a requeued job may start again (default 120 s)
AuthInfo=socket=${sock},cred_expire=10
StateSaveLocation=${dir}/state
SlurmdSpoolDir=${dir}/spool
SlurmctldPidFile=${dir}/run/slurmctld.daemon.pid
SlurmdPidFile=${dir}/run/slurmd.daemon.pid
SlurmctldLogFile=${dir}/log/slurmctld.log
SlurmdLogFile=${dir}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=${dir}/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=${SOF_SLURM_TASK_PLUGIN:-task/affinity}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=pmix
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
PropagateResourceLimits=NONE
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
MailProg=/bin/true
GresTypes=gpu
NodeName=${host} NodeHostname=${host} NodeAddr=127.0.0.1 ${shape}RealMemory=${mem} Gres=gpu:${ngpu} State=UNKNOWN
PartitionName=local Nodes=${host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
# Stand-in GPUs, so that recipes asking for --gpus-per-task=1 run unchanged: slurmd drops GPUs
# without device files and wants character devices, so DIR/dev/gpuN are links to /dev/null (no
# device cgroup here, nothing is restricted). Flags=no_gpu_env: Slurm sets no CUDA_VISIBLE_DEVICES,
# so the program sees the machine as it is (topo would take a numeric one for GPUs).
mkdir -p "$dir/dev"
for i in $(seq 0 $((ngpu - 1))); do ln -sfn /dev/null "$dir/dev/gpu$i"; done
echo "NodeName=${host} Name=gpu File=${dir}/dev/gpu[0-$((ngpu - 1))] Flags=no_gpu_env" >"$dir/etc/gres.conf"
export SLURM_CONF=$dir/etc/slurm.conf

"${life[@]}" slurmctld -D -i </dev/null >>"$dir/log/slurmctld.out" 2>&1 &
echo $! >"$dir/run/slurmctld.pid"
"${life[@]}" slurmd -D </dev/null >>"$dir/log/slurmd.out" 2>&1 &
echo $! >"$dir/run/slurmd.pid"

node_idle() { sinfo -h -N -o %T 2>/dev/null | grep -qx idle; }
if ! wait_for 30 "node ${host} idle" node_idle; then
  for f in slurmctld.out slurmctld.log slurmd.out slurmd.log; do
    echo "--- $dir/log/$f (last 15 lines)" >&2
    tail -15 "$dir/log/$f" >&2 2>/dev/null || true
  done
  "$0" stop "$dir"
  die_skip "Slurm did not come up on localhost (logs above)"
fi
echo "local_cluster: up in $dir (node ${host}, ${shape}slurmctld port ${ctld_port})"
echo "export SLURM_CONF=$dir/etc/slurm.conf"

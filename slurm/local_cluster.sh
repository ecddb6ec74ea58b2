#!/usr/bin/env bash
# slurm/local_cluster.sh: a real single-node Slurm cluster on this machine, for the tests and for trying
# `./bench.sh --slurm`. Debian's slurm-wlm and munge (Slurm 22.05 on Debian 12); no accounting, no systemd.
# Everything (config, state, spool, logs, munge key and socket) lives under one folder:
#
#   slurm/local_cluster.sh install            # apt-get install slurm-wlm munge (about 15 s)
#   eval "$(slurm/local_cluster.sh start)"    # starts munged, slurmctld, slurmd under a new temporary folder;
#                                             # prints "export SLURM_CONF=…" (sbatch, squeue, … use it)
#   ./bench.sh --slurm --experiments exp3 --seeds 1
#   squeue; sinfo
#   slurm/local_cluster.sh stop               # cancels the jobs, stops the daemons (the folder is kept: logs)
#
# start [DIR] and stop [DIR] take the folder; without it, stop uses $SLURM_CONF's folder. The node is this
# machine (`hostname -s`) with all its CPUs, in partition "local". Run it as root (slurmd starts the jobs as
# their user; install uses apt-get).
set -euo pipefail

MARK=BENCHBACK_LOCAL_SLURM  # an environment variable of the daemons (and so of slurmstepd): finds leftovers

die() {
  echo "local_cluster.sh: $*" >&2
  exit 2
}

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

need_binaries() {
  local missing=() b
  for b in munged slurmctld slurmd sbatch scontrol sinfo; do
    command -v "$b" >/dev/null || [[ -x /usr/sbin/$b ]] || missing+=("$b")
  done
  ((${#missing[@]} == 0)) || die "${missing[*]} not found: install slurm-wlm and munge ($0 install, as root)"
}

sbin() {  # the path of a daemon (Debian puts them in /usr/sbin, which a user's PATH may lack)
  command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() {  # write_config DIR
  local dir=$1 node user cpus port1 port2
  node=$(hostname -s)
  user=$(id -un)
  cpus=$(nproc)
  port1=$(free_port) port2=$(free_port)
  while [[ $port2 == "$port1" ]]; do port2=$(free_port); done
  mkdir -p "$dir"/{state,spool,log,munge}
  chmod 755 "$dir" "$dir/munge"  # munged refuses a socket folder that others may write to
  cat >"$dir/slurm.conf" <<CONF
# a single-node cluster made by slurm/local_cluster.sh; everything under $dir
ClusterName=local
SlurmctldHost=$node
SlurmctldPort=$port1
SlurmdPort=$port2
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket.2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$node CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
  echo "$MARK" >"$dir/.local_cluster"
}

wait_for() {  # wait_for SECONDS COMMAND...: until COMMAND succeeds; fails after SECONDS
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

node_is_up() {
  local state
  state=$(sinfo -h -N -o '%T' 2>/dev/null) || return 1
  [[ $state == idle* || $state == mixed* || $state == allocated* ]]
}

start() {
  local dir=${1:-}
  need_binaries
  (($(id -u) == 0)) || die "start needs root: slurmd starts the jobs as their user"
  if [[ -z $dir ]]; then dir=$(mktemp -d "${TMPDIR:-/tmp}/local-slurm.XXXXXX"); fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [[ ! -e $dir/slurmctld.pid ]] || die "$dir already holds a cluster; stop it first ($0 stop $dir)"
  write_config "$dir"
  export SLURM_CONF=$dir/slurm.conf
  export "$MARK=$dir"
  (umask 077 && dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none)
  # --force: munged only warns when a folder above DIR is private (e.g. pytest's tmp_path): the users whose
  # jobs reach the socket are then the folder's owner (root) alone. A DIR made here is open to all (755).
  "$(sbin munged)" --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket.2" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" ||
    { stop "$dir" >&2; die "munged did not start; see $dir/log/munged.log"; }
  "$(sbin slurmctld)" -f "$SLURM_CONF" ||
    { stop "$dir" >&2; die "slurmctld did not start; see $dir/log/slurmctld.log"; }
  "$(sbin slurmd)" -f "$SLURM_CONF" ||
    { stop "$dir" >&2; die "slurmd did not start; see $dir/log/slurmd.log"; }
  wait_for 60 node_is_up ||
    { stop "$dir" >&2; die "the node did not come up within 60 s; see $dir/log/"; }
  echo "export SLURM_CONF=$SLURM_CONF  # local Slurm cluster up; stop it with: $0 stop $dir"
}

no_running_job() {
  local jobs
  jobs=$(squeue -h -t running,completing -o %i 2>/dev/null) && [[ -z $jobs ]]
}

pid_of() {  # the live pid in a pid file, or nothing
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

marked_pids() {  # the processes started by this cluster's daemons (slurmstepd), found by their environment
  local p
  for p in /proc/[0-9]*; do
    [[ ${p#/proc/} != "$$" ]] || continue
    if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qxF "$MARK=$1"; then echo "${p#/proc/}"; fi
  done
}

descendants() {  # descendants PID...: every process below them, from each process's parent in /proc/*/stat
  local -A parent=() keep=() skip=()
  local p stat pid ppid changed=1
  for p in /proc/[0-9]*; do
    { stat=$(<"$p/stat"); } 2>/dev/null || continue
    read -r _ ppid _ <<<"${stat##*) }"  # the fields after the command name, which may hold spaces
    parent[${p#/proc/}]=$ppid
  done
  for pid in "$@"; do keep[$pid]=1; done
  pid=$BASHPID  # never this script or what runs it (stop may be called from inside a job)
  while [[ -n $pid && $pid != 0 && -z ${skip[$pid]:-} ]]; do skip[$pid]=1 pid=${parent[$pid]:-}; done
  while ((changed)); do
    changed=0
    for pid in "${!parent[@]}"; do
      if [[ -z ${keep[$pid]:-} && -z ${skip[$pid]:-} && -n ${keep[${parent[$pid]}]:-} ]]; then
        keep[$pid]=1 changed=1
        echo "$pid"
      fi
    done
  done
}

stop_pids() {  # stop_pids PID...: SIGTERM, then SIGKILL after 10 s
  local pid deadline=$((SECONDS + 10))
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then kill -KILL "$pid" 2>/dev/null || true; sleep 0.1; break; fi
      sleep 0.1
    done
  done
}

stop() {
  local dir=${1:-} jobs
  if [[ -z $dir ]]; then
    [[ -n ${SLURM_CONF:-} ]] || die "which cluster? give its folder ($0 stop DIR) or set SLURM_CONF"
    dir=$(dirname "$SLURM_CONF")
  fi
  [[ -f $dir/.local_cluster ]] || die "$dir is not a folder of $0"
  dir=$(cd "$dir" && pwd)
  export SLURM_CONF=$dir/slurm.conf
  # the jobs' processes, found before the cancel: a cancelled slurmstepd may exit and leave one orphaned
  # shellcheck disable=SC2046
  jobs=$(descendants $(marked_pids "$dir"))
  if [[ -n $(pid_of "$dir/slurmctld.pid") ]]; then  # cancel the jobs, so that slurmd ends their processes
    scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    wait_for 10 no_running_job || true
  fi
  # shellcheck disable=SC2046
  jobs="$jobs $(descendants $(marked_pids "$dir"))"  # and any the daemons started since (a busy machine is slow)
  # shellcheck disable=SC2086
  stop_pids $jobs  # what the cancel left of them
  # shellcheck disable=SC2046
  stop_pids $(pid_of "$dir/slurmd.pid") $(pid_of "$dir/slurmctld.pid")
  # shellcheck disable=SC2046
  stop_pids $(marked_pids "$dir")  # what is left of the daemons' children (slurmstepd)
  # shellcheck disable=SC2046
  stop_pids $(pid_of "$dir/munge/munged.pid")
  rm -f "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"
  echo "local Slurm cluster stopped; its logs are in $dir/log/"
}

status() {
  local dir=${1:-${SLURM_CONF:+$(dirname "$SLURM_CONF")}} name file
  [[ -n $dir && -f $dir/.local_cluster ]] || die "which cluster? give its folder ($0 status DIR) or set SLURM_CONF"
  for name in munged:munge/munged.pid slurmctld:slurmctld.pid slurmd:slurmd.pid; do
    file=$dir/${name#*:}
    if [[ -n $(pid_of "$file") ]]; then echo "${name%%:*} running (pid $(pid_of "$file"))"
    else echo "${name%%:*} not running"; fi
  done
}

install() {
  (($(id -u) == 0)) || die "install needs root (apt-get)"
  local log
  log=$(mktemp)  # quiet: apt's output is shown only when it fails
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
           slurm-wlm munge; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    die "apt-get install slurm-wlm munge failed"
  fi
  rm -f "$log"
}

case ${1:-} in
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  status) status "${2:-}" ;;
  install) install ;;
  -h | --help) usage ;;
  *) die "unknown command '${1:-}'; valid commands: start [DIR], stop [DIR], status [DIR], install" ;;
esac

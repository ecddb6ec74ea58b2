#!/usr/bin/env bash
# bench.sh: runs the experiment matrix of benchback-rl (study.toml), one fresh process per run.
# Resumable (a completed run is skipped) and shardable by cell (--shard K/N); --slurm submits it as a Slurm job
# array (one shard a task). ./bench.sh --help for the options (sweep/cli.py declares them).
# python -m sweep (and its parts) plans the sweep (the matrix from the study, the option checks, the shards, which runs are done);
# this script does the process work: env timing, one process per run, timeouts, logs, progress, Ctrl-C.
# What crosses from python -m sweep to this script is data (NUL-separated fields), never shell code: nothing is eval'd.
set -euo pipefail

HERE=$(dirname "$0")
# python -m sweep (the sweep's Python side, sweep/) wherever the sweep is started from
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
# after --timeout, a run gets SIGTERM (it saves its summary at the next iteration boundary), then SIGKILL this much
# later (--kill-after): long enough for one phase of the slowest iteration (an eager rollout on MinAtar took 55 s on
# the cpu-v2 VM, a whole iteration about 110 s) and the teardown
KILL_AFTER_S=300
MAX_SECONDS=2592000  # the longest --timeout and --kill-after, 30 days (sweep/option_checks.py's MAX_SECONDS, the same)

usage() {
  cat <<'EOF'
usage: ./bench.sh [options] [-- extra args passed to every run]

Runs the benchback-rl experiments of study.toml, one fresh process per run, into {log-dir}/{exp}/.
A run is skipped when a folder in {log-dir}/{exp}/ holds a completed run of the same command (config.json
"command": the same script and arguments, --log-dir aside), so an interrupted sweep resumes where it stopped; a run
stopped part-way after a save (--save-every) is continued in its folder with --resume, the others start afresh.
Each run's output goes to {log-dir}/logs/{exp}/. Before the runs, the env step costs are measured into
{log-dir}/env_timing.json when that file is missing, lacks an env of the sweep, or comes from another host
or device.

experiments (study.toml; each run is repeated for seeds 1..N):
EOF
  "$PYTHON" -m sweep experiments 2>/dev/null | sed 's/^/  /' || echo "  (see study.toml)"
  cat <<'EOF'

presets (study.toml's [presets]: a sweep by name, the options it sets and the arguments of every run):
EOF
  "$PYTHON" -m sweep presets 2>/dev/null | sed 's/^/  /' || echo "  (see study.toml)"
  cat <<'EOF'

options:
EOF
  "$PYTHON" -m sweep options 2>/dev/null | sed 's/^/  /' || echo "  (see sweep/cli.py)"
  cat <<'EOF'

One sweep at a time per log dir and shard: a second bench.sh on the same --log-dir and --shard is refused (exit 2),
while the first holds {log-dir}/.bench-K-of-N.lock. Sweeps of other shards run side by side, and never run one run
twice at once, whatever their shard counts (0/1 and 0/2 overlap): a sweep runs a cell (experiment, seed, env, size)
while it holds {log-dir}/.bench-cells/{cell}.lock, waits while another sweep holds it, and then skips the runs that
one completed. Ctrl-C or SIGTERM stops what is in progress at once (a run saves an "interrupted" summary; the env
timing, the planning or sbatch just end) and then the sweep, however bench.sh was started (in the background of a
script, under nohup). The arguments after -- reach every run as they are (any character); those the sweep sets
itself (--env, --env-backend, --model-size, --compile, --seed, --log-dir, --exp-name, --[no-]sync-timing, --dtype
(each experiment's dtypes in study.toml), and --num-iterations, --tag or --env-threads when --iterations, --tag or
--cpus is given) are refused, and so is one the scripts' own parser refuses (checked before the first run, in a few
seconds: the scripts are imported).

Slurm (the sweep as a job array; every other option above applies to each task):
EOF
  "$PYTHON" -m sweep options slurm 2>/dev/null | sed 's/^/  /' || echo "  (see sweep/cli.py)"
  cat <<'EOF'

examples:
  ./bench.sh --experiments exp1 --tag linux-h200
  ./bench.sh --shard 0/2 & ./bench.sh --shard 1/2    # two machines or GPUs, one sweep
  ./bench.sh --smoke                                 # the quick sweep, into runs-smoke/; then its analysis:
  python plot_results.py runs-smoke --out runs-smoke/analysis
  ./bench.sh --slurm --timeout 1800 --slurm-args "--partition=gpu --gres=gpu:1"   # the study on a cluster
EOF
}

die() {  # one line on stderr, exit 2 (bad input)
  echo "bench.sh: $*" >&2
  exit 2
}

quoted() {  # a value for a message, on one line whatever it holds: 'runs', $'a\nb'
  echo "${1@Q}"
}

number() {  # a number for a message: quoted, cut short when it is long (a count of 5000 digits)
  local head=${1:0:20}
  if ((${#1} > 40)); then echo "${head@Q}... (${#1} characters)"; else quoted "$1"; fi
}

within_max_seconds() {  # within_max_seconds SECONDS (digits, maybe a point): at most MAX_SECONDS; the digits are
  local whole=${1%%.*}  # counted before bash's arithmetic reads them (it wraps past 2**63 without a word)
  while [[ $whole == 0* ]]; do whole=${whole#0}; done
  ((${#whole} <= ${#MAX_SECONDS})) && (($(to_ms "$1") <= MAX_SECONDS * 1000))
}

# ---------------------------------------------------------------------------------------- options
LOG_DIR=runs TIMEOUT="" CPUS="" ENV_THREADS="" PYTHON=python ENV_TIMING=1 ENV_TIMING_FILE="" DRY_RUN=0 HELP=0 SLURM=0 SLURM_OPTION=""
KILL_AFTER_GIVEN=0 LOG_DIR_GIVEN=0 PRESET=""
SWEEP_ARGS=()  # the matrix options, for python -m sweep
SLURM_ARGS=()  # --slurm-tasks, --slurm-parallel, --slurm-args, for python -m sweep sbatch
EXTRA=()

# The names of the options, as sweep/cli.py declares them (tests/test_bench.py holds them to it): those that take a
# value, then the flags. bash reads its command line itself: the interpreter that would read sweep/cli.py is one of
# the options (--python).
VALUE_OPTIONS=" --experiments --frameworks --envs --sizes --compile-modes --seeds --iterations --tag --save-every --log-dir\
 --preset --timeout --kill-after --cpus --shard --python --env-timing-file --slurm-tasks --slurm-parallel --slurm-args "
FLAGS=" --smoke --no-env-timing --dry-run --help --slurm "

check_option() {  # dies on an unknown option
  [[ $VALUE_OPTIONS == *" $1 "* ]] ||
    die "unknown option $(quoted "$1"); valid options:${VALUE_OPTIONS% }${FLAGS% } (then -- extra run args)"
}

set_option() {  # set_option --name value
  check_option "$1"
  [[ -n $2 ]] || die "$1 is empty: an empty value names nothing"
  case $1 in
    --log-dir) LOG_DIR=$2 LOG_DIR_GIVEN=1 ;;
    --preset) PRESET=$2 SWEEP_ARGS+=("$1=$2") ;;  # python -m sweep reads the preset; its name makes the default log dir
    --timeout) TIMEOUT=$2 ;;
    --kill-after) KILL_AFTER_S=$2 KILL_AFTER_GIVEN=1 ;;
    --cpus) CPUS=$2 ENV_THREADS=$2 ;;  # CPUS becomes every core when not given; ENV_THREADS stays unset
    --python) PYTHON=$2 ;;
    --env-timing-file) ENV_TIMING_FILE=$2 ;;
    --slurm-tasks | --slurm-parallel | --slurm-args) SLURM_ARGS+=("$1=$2") SLURM_OPTION=$1 ;;
    *) SWEEP_ARGS+=("$1=$2") ;;  # the matrix options: python -m sweep checks them against the study
  esac
}

parse_args() {
  while (($#)); do
    case $1 in
      -h | --help) HELP=1 ;;
      --dry-run) DRY_RUN=1 ;;
      --no-env-timing) ENV_TIMING=0 ;;
      --slurm) SLURM=1 ;;
      --smoke) set_option --preset smoke ;;
      --) shift; EXTRA=("$@"); return ;;
      --*=*) set_option "${1%%=*}" "${1#*=}" ;;
      *)
        check_option "$1"
        (($# >= 2)) || die "option $1 needs a value"
        set_option "$1" "$2"
        shift ;;
    esac
    shift
  done
}

check_log_dir() {  # --log-dir must be a folder, or a path where one can be made: checked before anything else
  local dir=$LOG_DIR
  [[ -n $dir ]] || die "--log-dir is empty"
  [[ ! -e $dir || -d $dir ]] || die "--log-dir $(quoted "$LOG_DIR") exists and is not a folder; give a folder" \
    "(it is made when missing)"
  while [[ ! -e $dir && $dir != / && $dir != . ]]; do dir=$(dirname -- "$dir"); done  # the nearest existing parent
  [[ -e $dir ]] || return 0
  [[ -d $dir ]] || die "--log-dir $(quoted "$LOG_DIR") cannot be made: $(quoted "$dir") is not a folder"
}

check_args() {  # the process options; python -m sweep checks the matrix options
  check_log_dir
  if [[ -n $TIMEOUT ]]; then
    [[ $TIMEOUT =~ ^[0-9]*\.?[0-9]+$ && ! $TIMEOUT =~ ^[0.]+$ ]] && within_max_seconds "$TIMEOUT" ||
      die "--timeout must be a positive number of seconds up to $MAX_SECONDS (30 days), got $(number "$TIMEOUT")"
    TIMEOUT_BIN=$(command -v timeout || command -v gtimeout) || die "--timeout needs GNU timeout (coreutils), not found"
  fi
  [[ $KILL_AFTER_S =~ ^[0-9]*\.?[0-9]+$ ]] && within_max_seconds "$KILL_AFTER_S" ||
    die "--kill-after must be a number of seconds up to $MAX_SECONDS (30 days), got $(number "$KILL_AFTER_S")"
  [[ -n $TIMEOUT ]] || ((!KILL_AFTER_GIVEN)) || die "--kill-after needs --timeout"
  command -v -- "$PYTHON" >/dev/null ||
    die "--python $(quoted "$PYTHON") is not an executable; give a Python interpreter"
  if [[ -n $CPUS ]]; then
    [[ $CPUS =~ ^[1-9][0-9]*$ ]] || die "--cpus must be a positive integer, got $(number "$CPUS")"
    # ten digits or more: no machine's cores (and bash's arithmetic would wrap a number past 2**63 without a word)
    ((${#CPUS} < 10)) || die "--cpus $(number "$CPUS") is more than a machine's cores; valid: 1 to its cores"
    ((SLURM)) || check_cpus
  fi
  if ((!SLURM)); then
    [[ -z $SLURM_OPTION ]] || die "$SLURM_OPTION needs --slurm"
  elif [[ -n $ENV_TIMING_FILE ]]; then
    die "--env-timing-file does not go with --slurm: each node measures into {log-dir}/env_timing/{hostname}.json"
  elif ((!DRY_RUN)) && ! command -v sbatch >/dev/null; then
    die "--slurm: sbatch was not found; run this on a Slurm login node (or start a local one: slurm/local_cluster.sh)"
  fi
}

check_cpus() {  # the cores of --cpus (the first N this process may use): CPU_LIST; dies when there are fewer
  local available
  capture available run_child "$PYTHON" -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))'
  IFS=, read -r -a CORES <<<"$available"
  ((CPUS <= ${#CORES[@]})) || die "--cpus $CPUS is more than the ${#CORES[@]} cores this process may use; valid: 1 to ${#CORES[@]}"
  command -v taskset >/dev/null || die "--cpus needs taskset (util-linux), not found"
  CPU_LIST=$(IFS=,; echo "${CORES[*]:0:CPUS}")
}

resources() {  # PIN: the command prefix that gives a run its cores and threads (every core by default)
  if [[ -z $CPUS ]]; then CPUS=$(nproc); fi
  if [[ -z ${CPU_LIST:-} ]] && command -v taskset >/dev/null; then check_cpus; fi
  PIN=(env OMP_NUM_THREADS="$CPUS")
  if [[ -n ${CPU_LIST:-} ]]; then PIN+=(taskset -c "$CPU_LIST"); fi
}

sweep_py() {  # sweep_py ACTION [ARGS]: python -m sweep with the matrix options of this sweep, as a child (run_child)
  # (every value goes to a program as --name=VALUE: one that starts with "-", e.g. --shard -1/2, stays a value,
  # which the check then names, instead of an option; a path that does goes to a command after --)
  run_child "$PYTHON" -m sweep "$1" "${@:2}" ${SWEEP_ARGS[@]+"${SWEEP_ARGS[@]}"} --log-dir="$LOG_DIR" \
    --python="$PYTHON" ${ENV_THREADS:+--env-threads="$ENV_THREADS"} -- ${EXTRA[@]+"${EXTRA[@]}"}
}

# ---------------------------------------------------------------------------------------- signals
# SIGINT or SIGTERM stops the run in progress (SIGTERM: it saves an "interrupted" summary), then the sweep. A shell
# started with a signal ignored cannot trap it (bash drops such a trap without a word), and a script's `./bench.sh &`
# starts it with SIGINT ignored (as under `nohup … &` from a script): then this script is run again, once, through
# Python, with SIGINT and SIGTERM back to their defaults ($BENCHBACK_SIGNALS_RESET marks the second start).
# Whatever this script runs, it runs as a child in the background and waits for (run_child, execute): bash runs a
# trap only once the foreground command has ended, which would keep a signal waiting for the whole env timing or a
# hung sbatch; a wait ends at once, and on_signal passes the signal on to the child.
RESET_SIGNALS_PY='
import os, signal, sys
for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])
'

reset_ignored_signals() {  # reset_ignored_signals ARGS...: re-runs this script when SIGINT or SIGTERM is ignored
  if [[ -n ${BENCHBACK_SIGNALS_RESET:-} ]]; then
    unset BENCHBACK_SIGNALS_RESET  # not for the runs
    return
  fi
  [[ $(trap -p INT TERM) == *"trap -- ''"* ]] || return 0  # how bash lists a signal ignored at its start
  remove_captured
  BENCHBACK_SIGNALS_RESET=1 exec "$PYTHON" -c "$RESET_SIGNALS_PY" "$BASH" "$0" "$@"
}

CHILD="" INTERRUPTED=0 CAPTURED=""
on_signal() {  # Ctrl-C or SIGTERM: stop the current child (a run saves an "interrupted" summary), then the sweep
  INTERRUPTED=1
  if [[ -n $CHILD ]]; then kill -TERM "$CHILD" 2>/dev/null || true; fi
}

wait_child() {  # wait_child PID: waits for the child PID, which was started in the background (&); RC: its status
  CHILD=$1
  if ((INTERRUPTED)); then kill -TERM "$CHILD" 2>/dev/null || true; fi  # a signal came before CHILD was set
  while :; do  # wait returns early (> 128) on a signal we trap: the child is ending (a run saves its summary)
    RC=0
    wait "$CHILD" || RC=$?
    ((RC > 128)) && kill -0 "$CHILD" 2>/dev/null || break
  done
  CHILD=""
}

run_child() {  # run_child CMD...: CMD (a program, not a function) as a child, waited for; its stdout to $STDOUT_TO
  # when set. After a signal: exit 130 (the sweep stops). Returns CMD's exit status.
  stop_if_interrupted
  if [[ -n ${STDOUT_TO:-} ]]; then "$@" >"$STDOUT_TO" & else "$@" & fi
  wait_child $!
  stop_if_interrupted
  return "$RC"
}

capture() {  # capture VAR CMD...: CMD (run_child ..., sweep_py ...), its stdout into VAR, without trailing newlines
  # (as VAR=$(CMD) would, but through a file: a command substitution is a foreground wait)
  local rc=0
  if [[ -z $CAPTURED ]]; then CAPTURED=$(mktemp); fi
  STDOUT_TO=$CAPTURED "${@:2}" || rc=$?
  printf -v "$1" '%s' "$(<"$CAPTURED")"
  return "$rc"
}

remove_captured() {
  if [[ -n $CAPTURED ]]; then rm -f -- "$CAPTURED"; fi
}

stop_if_interrupted() {
  if ((INTERRUPTED)); then
    echo "interrupted: run the same command again to resume" >&2
    exit 130
  fi
}

# ------------------------------------------------------------------------------------------ lock
# One sweep at a time per log dir and shard: two would run the same runs twice. The lock: flock(2) on the file
# {log-dir}/.bench-K-of-N.lock, taken by Python on a file descriptor of this shell, so that it is held until this
# shell and the runs it started (they inherit the descriptor) are gone, however they end. A second sweep is refused,
# not queued. Other shards of one log dir run side by side (./bench.sh --shard 0/2 & ./bench.sh --shard 1/2, the
# Slurm tasks), and so do overlapping shards of different counts (0/1 and 0/2), one cell at a time (claim_cell).
LOCK_PY='
import datetime, fcntl, os, socket, sys
fd, path, holder = int(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:  # held: say by whom, on one line (what the holder wrote)
    with open(path, errors="replace") as f:
        print(" ".join(f.read().split()) or "a sweep that wrote nothing")
    sys.exit(3)
except OSError as e:  # a filesystem without locks (NFS without its lock daemon, Lustre without -o flock, ...)
    print(e.strerror or e)
    sys.exit(4)
os.ftruncate(fd, 0)
since = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
os.write(fd, f"{holder} on {socket.gethostname()}, since {since}\n".encode())
'

lock_log_dir() {  # LOCK_FD: this sweep's hold on {log-dir}/.bench-K-of-N.lock; exit 2 when another sweep holds it
  local file=$LOG_DIR/.bench-${SHARD/\//-of-}.lock said rc=0
  mkdir -p -- "$LOG_DIR" 2>/dev/null || die "cannot make --log-dir $(quoted "$LOG_DIR"); give one you may write to"
  { exec {LOCK_FD}>>"$file"; } 2>/dev/null || die "cannot write $(quoted "$file"); give a --log-dir you may write to"
  capture said run_child "$PYTHON" -c "$LOCK_PY" "$LOCK_FD" "$file" "pid $$ (shard $SHARD)" || rc=$?
  case $rc in
    0) ;;
    3) die "another sweep of shard $SHARD is running into $(quoted "$LOG_DIR") ($said); refused, not queued:" \
         "start this one when it ends, or give another --log-dir" ;;
    4) echo "bench.sh: warning: cannot lock $(quoted "$file") ($said); two sweeps on this log dir and shard" \
         "would run the same runs twice" >&2 ;;
    *) stop_if_interrupted; exit "$rc" ;;
  esac
}

# One sweep at a time per cell, whatever the shards (0/1 and 0/2 overlap, as a shard of one count and one of another
# may): sweep/resume.py's claim_cell() locks the cell's {log-dir}/.bench-cells/{cell id}.lock on a file descriptor of this
# shell, CELL_FD, waits while another sweep holds it, and says which of the cell's runs are done by then. The lock is
# held until this shell moves on to the next cell (or is gone, with the runs it started).
CELL_FD=""
claim_cell() {  # claim_cell I: the cell of the run PLAN[I] (its runs follow one another) is this sweep's; its runs
  # completed meanwhile by another sweep become "taken"; the previous cell is let go
  local i=$1 cell=${PLAN[$1 + 3]} n todo=() words=() said states=() file rc=0 k
  release_cell
  while ((i < ${#PLAN[@]})) && [[ ${PLAN[i + 3]} == "$cell" ]]; do
    n=${PLAN[i + 4]}
    if [[ ${PLAN[i]} == todo ]]; then todo+=("$i") words+=("$n" "${PLAN[@]:i + 5:n}"); fi
    i=$((i + 5 + n))
  done
  ((${#todo[@]})) || return 0  # every run of it is done: nothing to hold
  file=$LOG_DIR/.bench-cells/$cell.lock
  { mkdir -p -- "$LOG_DIR/.bench-cells" && exec {CELL_FD}>>"$file"; } 2>/dev/null ||
    die "cannot write $(quoted "$file"); give a --log-dir you may write to"
  capture said run_child "$PYTHON" -m sweep claim --fd="$CELL_FD" --lock="$file" \
    --holder="pid $$ (shard $SHARD)" --description="${PLAN[${todo[0]} + 1]}" --log-dir="$LOG_DIR" -- "${words[@]}" ||
    rc=$?
  ((rc == 0)) || exit "$rc"
  read -r -a states <<<"$said"
  for k in "${!todo[@]}"; do
    if [[ ${states[k]:-} == done ]]; then PLAN[todo[k]]=taken; fi
  done
}

release_cell() {
  if [[ -n $CELL_FD ]]; then
    exec {CELL_FD}>&-
    CELL_FD=""
  fi
}

# ------------------------------------------------------------------------------------------ plan
check_plan() {  # SHARD: python -m sweep checks the matrix options (exit 2 names a bad one) before anything is made
  local rc=0
  capture SHARD sweep_py check || rc=$?
  ((rc == 0)) || exit "$rc"
}

plan() {  # PLAN: python -m sweep's plan, NUL-separated fields (data: read, never run); NUM_RUNS … from its header
  local file rc=0
  file=$(mktemp)
  STDOUT_TO=$file sweep_py plan || rc=$?
  mapfile -d '' -t PLAN <"$file"
  rm -f "$file"
  ((rc == 0)) || exit "$rc"  # python -m sweep said why
  NUM_RUNS=${PLAN[0]} NUM_TODO=${PLAN[1]} NUM_CELLS=${PLAN[2]} MATRIX_SIZE=${PLAN[3]} SHARD=${PLAN[4]}
}

time_envs_first() {  # sweep/env_timing.py into {log-dir}/env_timing.json when that is missing or from another machine
  local out=${ENV_TIMING_FILE:-$LOG_DIR/env_timing.json} verdict
  ((ENV_TIMING)) || return 0
  capture verdict sweep_py env-timing --file="$out" || {  # nothing: usable; else line 1 says why, line 2 the envs
    echo "bench.sh: warning: could not check $out; the sweep goes on without env timing" >&2
    return 0
  }
  [[ -n $verdict ]] || return 0
  echo "measuring the env step costs first: ${verdict%%$'\n'*} (--no-env-timing skips this)"
  run_child "$PYTHON" -m sweep.env_timing --envs="${verdict#*$'\n'}" --out="$out" \
    ${ENV_THREADS:+--env-threads="$ENV_THREADS"} ||
    echo "bench.sh: warning: sweep/env_timing.py failed; the sweep goes on" >&2
}

# ------------------------------------------------------------------------------------------ sweep
now_ms() {
  if [[ -n ${EPOCHREALTIME:-} ]]; then
    local t=${EPOCHREALTIME/[.,]/}
    echo $((t / 1000))
  else
    echo $(($(date +%s) * 1000))
  fi
}

fmt_ms() {  # 12.3s, 4m05s, 2h03m
  local s=$(($1 / 1000))
  if ((s < 60)); then printf '%d.%ds' "$s" $(($1 % 1000 / 100))
  elif ((s < 3600)); then printf '%dm%02ds' $((s / 60)) $((s % 60))
  else printf '%dh%02dm' $((s / 3600)) $((s % 3600 / 60)); fi
}

execute() {  # execute LOG: runs CMD in the background (so that signals reach us), output to LOG; sets RC
  local timeout_cmd=() cache_dir
  if [[ -n $TIMEOUT ]]; then timeout_cmd=("$TIMEOUT_BIN" --kill-after="$KILL_AFTER_S" "$TIMEOUT"); fi
  mkdir -p -- "$(dirname -- "$1")"
  cache_dir=$(mktemp -d)  # a fresh TorchInductor cache, and no JAX one: no run reuses what another run compiled
  TORCHINDUCTOR_CACHE_DIR=$cache_dir JAX_COMPILATION_CACHE_DIR='' \
    ${timeout_cmd[@]+"${timeout_cmd[@]}"} "${PIN[@]}" "${CMD[@]}" >"$1" 2>&1 &
  wait_child $!
  rm -rf "$cache_dir"
}

to_ms() {  # to_ms SECONDS: 1.5 -> 1500
  local whole=${1%%.*} frac=000
  if [[ $1 == *.* ]]; then frac=${1#*.}000; fi
  echo $((10#${whole:-0} * 1000 + 10#${frac:0:3}))
}

outcome() {  # outcome RC ELAPSED_MS: OUTCOME, the words for the progress line, and KIND: what to count it as
  KIND=failed OUTCOME="failed (exit $1)"
  if (($1 == 0)); then
    KIND=completed OUTCOME=completed
  elif [[ -n $TIMEOUT ]] && (($1 == 124 || ($1 == 128 + 9 && $2 >= $(to_ms "$TIMEOUT")))); then
    # timeout's 124: the run ended after its SIGTERM (it saved an "interrupted" summary); 137 after the time limit:
    # it was still running --kill-after seconds later, and got SIGKILL (maybe after writing its summary)
    OUTCOME="timed out (--timeout $TIMEOUT$( (($1 == 124)) || echo ", killed ${KILL_AFTER_S}s later"))"
  elif ((INTERRUPTED)); then
    KIND=interrupted OUTCOME=interrupted
  elif (($1 == 128 + 2 || $1 == 128 + 15)); then  # the scripts' exit 130 after a SIGINT or SIGTERM, or died of one
    KIND=interrupted OUTCOME="interrupted (exit $1: a SIGINT or SIGTERM reached the run alone)"
  fi
}

sweep() {
  local i=5 n state description log_stem k=0 completed=0 failed=0 skipped=0 interrupted=0 ran_ms=0 ran=0 start end log
  local cell=""
  while ((i < ${#PLAN[@]})); do  # per run: done|todo, description, log stem, cell, N, the N words of its command
    if ((INTERRUPTED)); then break; fi
    if [[ ${PLAN[i + 3]} != "$cell" ]]; then  # the first run of a cell
      cell=${PLAN[i + 3]}
      claim_cell "$i"
    fi
    state=${PLAN[i]} description=${PLAN[i + 1]} log_stem=${PLAN[i + 2]} n=${PLAN[i + 4]}
    CMD=("${PLAN[@]:i + 5:n}")
    i=$((i + 5 + n))
    k=$((k + 1))
    printf '[%d/%d] %s ... ' "$k" "$NUM_RUNS" "$description"
    if [[ $state != todo ]]; then
      skipped=$((skipped + 1))
      case $state in
        done) echo "skipped (completed earlier)" ;;
        *) echo "skipped (completed by another sweep)" ;;  # taken: claim_cell found it completed
      esac
      continue
    fi
    if ((INTERRUPTED)); then echo "not started"; break; fi  # right before the run: no new run after Ctrl-C
    log=$LOG_DIR/${log_stem}__$(date +%s).log
    start=$(now_ms)
    execute "$log"
    end=$(now_ms)
    ran=$((ran + 1)) ran_ms=$((ran_ms + end - start))
    outcome "$RC" $((end - start))
    echo "$OUTCOME in $(fmt_ms $((end - start))) | ETA $(fmt_ms $((ran_ms / ran * (NUM_TODO - ran))))"
    case $KIND in
      completed) completed=$((completed + 1)) ;;
      failed) failed=$((failed + 1)) ;;
      interrupted) if ((!INTERRUPTED)); then interrupted=$((interrupted + 1)); fi ;;  # the sweep's own: not counted
    esac
    if ((RC != 0)); then
      echo "    log: $log"
      tail -n 3 -- "$log" | sed 's/^/    | /'
    fi
  done
  release_cell
  echo "$completed completed, $failed failed, $skipped skipped$( ((!interrupted)) || echo ", $interrupted interrupted")"
  stop_if_interrupted
  ((failed + interrupted == 0)) || exit 1
}

# ------------------------------------------------------------------------------------------ Slurm
submit() {  # --slurm: python -m sweep writes the sbatch script of the job array; this submits it (or prints it: --dry-run)
  local out rc=0 script slurm_dir file job
  capture out sweep_py sbatch --kill-after="$KILL_AFTER_S" ${ENV_TIMING_ARG[@]+"${ENV_TIMING_ARG[@]}"} \
    ${TIMEOUT:+--timeout="$TIMEOUT"} ${CPUS:+--cpus="$CPUS"} ${SLURM_ARGS[@]+"${SLURM_ARGS[@]}"} || rc=$?
  ((rc == 0)) || exit "$rc"  # python -m sweep said why (exit 2: a bad option)
  read -r NUM_RUNS NUM_TODO NUM_CELLS NUM_TASKS <<<"${out%%$'\n'*}"
  script=${out#*$'\n'}
  if ((DRY_RUN)); then
    printf '%s\n' "$script"
    echo "dry run: sbatch script of $NUM_TASKS array tasks for $NUM_RUNS runs ($((NUM_RUNS - NUM_TODO)) already" \
         "completed) in $NUM_CELLS cells; nothing submitted"
    return
  fi
  if ((NUM_TODO == 0)); then
    echo "all $NUM_RUNS runs of this sweep are completed in $LOG_DIR: nothing to submit"
    return
  fi
  slurm_dir=$LOG_DIR/logs/slurm
  mkdir -p -- "$slurm_dir"  # Slurm writes the tasks' output there: it must exist before a task starts
  file=$slurm_dir/benchback_$(date +%Y%m%d-%H%M%S).sbatch
  printf '%s\n' "$script" >"$file"
  capture job run_child sbatch --parsable -- "$file" || {
    rm -f "$file"
    rmdir -- "$slurm_dir" "$LOG_DIR/logs" "$LOG_DIR" 2>/dev/null || true  # only what is empty
    echo "bench.sh: sbatch refused the job (see its message above); bench.sh --dry-run --slurm prints the script" >&2
    exit 1
  }
  job=${job%%;*}  # "id;cluster" on a multi-cluster setup
  echo "submitted job array $job: $NUM_TASKS tasks; runs to do: $NUM_TODO of $NUM_RUNS, in $NUM_CELLS cells"
  echo "  script: $file"
  echo "  logs:   $slurm_dir/${job}_{0..$((NUM_TASKS - 1))}.out, one per task; each run's log in $LOG_DIR/logs/{exp}/"
  echo "  runs:   $LOG_DIR/{exp}/, from every node (the same folder on a shared filesystem)"
  echo "  follow: squeue -j $job   |   tail -f $slurm_dir/${job}_*.out"
  echo "  resume: submit the same command again: completed runs are skipped"
}

main() {
  parse_args "$@"
  if [[ -n $PRESET ]] && ((!LOG_DIR_GIVEN)); then LOG_DIR=runs-$PRESET; fi  # a preset's runs apart from the study's
  if ((HELP)); then usage; exit 0; fi
  trap on_signal INT TERM  # from here on, a signal stops the child in progress (run_child), then bench.sh
  trap remove_captured EXIT
  check_args
  if ((SLURM)); then
    ENV_TIMING_ARG=()
    if ((!ENV_TIMING)); then ENV_TIMING_ARG=(--no-env-timing); fi
    submit
    return
  fi
  if ((DRY_RUN)); then sweep_py dry-run; return; fi
  reset_ignored_signals "$@"
  check_plan
  lock_log_dir
  plan
  time_envs_first
  resources
  echo "sweep: $NUM_RUNS runs ($NUM_TODO to run) in $NUM_CELLS cells, of $MATRIX_SIZE runs in the matrix," \
       "into $LOG_DIR (shard $SHARD); every run on cores ${CPU_LIST:-(any)} with $CPUS threads"
  sweep
}

# one line: bash reads a script as it runs, so an edit of this file during a sweep must not reach it after main
main "$@"; exit

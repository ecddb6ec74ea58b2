#!/usr/bin/env bash
# bench.sh: runs the experiment matrix of benchback-rl (study.toml), one fresh process per run; ./bench.sh --help.
# python -m sweep reads and checks the command line (sweep/bench.py), plans the sweep (the runs, shards, which are
# done) and takes the locks; this script does the process work: env timing, one process per run, timeouts, logs,
# progress, Ctrl-C. What crosses from Python to it is data (NUL-separated fields), never shell code.
set -euo pipefail

HERE=$(dirname "$0")
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"  # python -m sweep wherever the sweep is started from

die() { echo "bench.sh: $*" >&2; exit 2; }  # one line on stderr, exit 2 (bad input)

# ---------------------------------------------------------------------------------------- signals
# SIGINT or SIGTERM stops the run in progress (it saves an "interrupted" summary), then the sweep. A shell started
# with a signal ignored (`./bench.sh &` in a script, nohup) cannot trap it: then python -m sweep restart starts this
# script again, once, with SIGINT and SIGTERM at their defaults. Whatever this script runs, it runs as a child in the
# background and waits for (run_child, execute): bash runs a trap only once a foreground command has ended (a hung
# sbatch), while a wait ends at once, and on_signal passes the signal on to the child.
reset_ignored_signals() {  # reset_ignored_signals ARGS...
  if [[ -n ${BENCHBACK_SIGNALS_RESET:-} ]]; then unset BENCHBACK_SIGNALS_RESET; return; fi  # not for the runs
  [[ $(trap -p INT TERM) == *"trap -- ''"* ]] || return 0  # how bash lists a signal ignored at its start
  exec "$BOOT" -m sweep restart "$BASH" "$0" "$@"
}

CHILD="" INTERRUPTED=0 CAPTURED=""
on_signal() {  # Ctrl-C or SIGTERM: stop the current child (a run saves an "interrupted" summary), then the sweep
  INTERRUPTED=1; if [[ -n $CHILD ]]; then kill -TERM "$CHILD" 2>/dev/null || true; fi
}

wait_child() {  # wait_child PID: waits for the child PID, which was started in the background (&); RC: its status
  CHILD=$1
  if ((INTERRUPTED)); then kill -TERM "$CHILD" 2>/dev/null || true; fi  # a signal came before CHILD was set
  while :; do  # wait returns early (> 128) on a signal we trap: the child is ending (a run saves its summary)
    RC=0 && wait "$CHILD" || RC=$?
    ((RC > 128)) && kill -0 "$CHILD" 2>/dev/null || break
  done
  CHILD=""
}

run_child() {  # run_child CMD...: CMD (a program) as a child, waited for; its stdout to $STDOUT_TO when set.
  stop_if_interrupted  # after a signal: exit 130 (the sweep stops). Returns CMD's exit status.
  if [[ -n ${STDOUT_TO:-} ]]; then "$@" >"$STDOUT_TO" & else "$@" & fi
  wait_child $!
  stop_if_interrupted
  return "$RC"
}

capture() {  # capture VAR CMD...: CMD's stdout into VAR, without trailing newlines (as VAR=$(CMD), but through a
  # file: a command substitution is a foreground wait); capture -a ARRAY CMD...: its NUL-separated fields (data)
  local rc=0 fields=0
  if [[ $1 == -a ]]; then fields=1 && shift; fi
  if [[ -z $CAPTURED ]]; then CAPTURED=$(mktemp); fi
  STDOUT_TO=$CAPTURED "${@:2}" || rc=$?
  if ((fields)); then mapfile -d '' -t "$1" <"$CAPTURED"; else printf -v "$1" '%s' "$(<"$CAPTURED")"; fi
  return "$rc"
}

remove_captured() { if [[ -n $CAPTURED ]]; then rm -f -- "$CAPTURED"; fi; }

stop_if_interrupted() {
  if ((INTERRUPTED)); then echo "interrupted: run the same command again to resume" >&2; exit 130; fi
}

sweep_py() { run_child "$PYTHON" -m sweep "$@" "${SWEEP_WORDS[@]}"; }  # ACTION [ARGS], this sweep's options, --

# ------------------------------------------------------------------------------------------ locks
# One sweep at a time per log dir and shard (two would run the same runs twice), and one per cell whatever the
# shards (0/1 and 0/2 overlap). Each lock: flock(2), taken by python -m sweep (sweep/resume.py's take_lock) on a
# file descriptor of this shell, held until this shell closes it or is gone with the runs it started (they inherit
# the descriptor), however they end. A second sweep of the shard is refused; a sweep waits for a cell's lock.
open_lock() {  # open_lock VAR FILE: FILE opened for appending on a new descriptor, into VAR
  { mkdir -p -- "$(dirname -- "$2")" && exec {fd}>>"$2"; } 2>/dev/null ||
    die "cannot write ${2@Q}; give a --log-dir you may write to"
  printf -v "$1" '%s' "$fd"
}

lock_log_dir() {  # LOCK_FD: this sweep's hold on {log-dir}/.bench-K-of-N.lock; exit 2 when another sweep holds it
  local file=$LOG_DIR/.bench-${SHARD/\//-of-}.lock
  open_lock LOCK_FD "$file"
  run_child "$PYTHON" -m sweep lock --fd="$LOCK_FD" --lock="$file" --holder="pid $$ (shard $SHARD)" || exit $?
}

CELL_FD="" && declare -A WHEN=([done]=earlier [taken]="by another sweep")
claim_cell() {  # claim_cell I: the cell of the run PLAN[I] (its runs follow one another) is this sweep's; its runs
  # completed meanwhile by another sweep become "taken"; the previous cell is let go
  local i=$1 cell=${PLAN[$1 + 3]} n todo=() words=() said states=() k
  release_cell
  while ((i < ${#PLAN[@]})) && [[ ${PLAN[i + 3]} == "$cell" ]]; do
    n=${PLAN[i + 4]}
    if [[ ${PLAN[i]} == todo ]]; then todo+=("$i") words+=("$n" "${PLAN[@]:i + 5:n}"); fi
    i=$((i + 5 + n))
  done
  ((${#todo[@]})) || return 0  # every run of it is done: nothing to hold
  open_lock CELL_FD "$LOG_DIR/.bench-cells/$cell.lock"
  capture said run_child "$PYTHON" -m sweep claim --fd="$CELL_FD" --lock="$LOG_DIR/.bench-cells/$cell.lock" \
    --holder="pid $$ (shard $SHARD)" --description="${PLAN[${todo[0]} + 1]}" --log-dir="$LOG_DIR" -- \
    "${words[@]}" || exit $?
  read -r -a states <<<"$said"
  for k in "${!todo[@]}"; do if [[ ${states[k]:-} == done ]]; then PLAN[todo[k]]=taken; fi; done
}

release_cell() { if [[ -n $CELL_FD ]]; then exec {CELL_FD}>&-; CELL_FD=""; fi; }

# ------------------------------------------------------------------------------------------ sweep
time_envs_first() {  # sweep/env_timing.py into the env timing file when that is missing or from another machine
  local out=$ENV_TIMING_FILE verdict
  [[ -n $out ]] || return 0  # --no-env-timing
  # nothing: usable; else line 1 says why, line 2 the envs
  capture verdict sweep_py env-timing --file="$out" ||
    { echo "bench.sh: warning: could not check $out; the sweep goes on without env timing" >&2; return 0; }
  [[ -n $verdict ]] || return 0
  echo "measuring the env step costs first: ${verdict%%$'\n'*} (--no-env-timing skips this)"
  run_child "$PYTHON" -m sweep.env_timing --envs="${verdict#*$'\n'}" --out="$out" \
    ${ENV_THREADS:+--env-threads="$ENV_THREADS"} ||
    echo "bench.sh: warning: sweep/env_timing.py failed; the sweep goes on" >&2
}

now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }

fmt_ms() {  # 12.3s, 4m05s, 2h03m
  local s=$(($1 / 1000))
  if ((s < 60)); then printf '%d.%ds' "$s" $(($1 % 1000 / 100)); return; fi
  if ((s < 3600)); then printf '%dm%02ds' $((s / 60)) $((s % 60)); return; fi
  printf '%dh%02dm' $((s / 3600)) $((s % 3600 / 60))
}

to_ms() {  # to_ms SECONDS: 1.5 -> 1500
  local whole=${1%%.*} frac=000
  if [[ $1 == *.* ]]; then frac=${1#*.}000; fi
  echo $((10#${whole:-0} * 1000 + 10#${frac:0:3}))
}

execute() {  # execute LOG: runs CMD in the background (so that signals reach us), output to LOG; sets RC
  local timeout_cmd=() pin=(env OMP_NUM_THREADS="$CPUS") cache_dir
  if [[ -n $TIMEOUT ]]; then timeout_cmd=("$TIMEOUT_BIN" --kill-after="$KILL_AFTER" "$TIMEOUT"); fi
  if [[ -n $CPU_LIST ]]; then pin+=(taskset -c "$CPU_LIST"); fi
  mkdir -p -- "$(dirname -- "$1")"
  [[ ! -L $1 ]] || die "$1 is a symbolic link: bench.sh writes no log through a link it did not make"
  cache_dir=$(mktemp -d)  # a fresh TorchInductor cache, and no JAX one: no run reuses what another run compiled
  # setsid: the run in a process group of its own, so that a terminal's Ctrl-C reaches bench.sh alone, which
  # passes it on once (SIGTERM): a run that also got the SIGINT took the second signal as "stop at once",
  # mid-compilation
  TORCHINDUCTOR_CACHE_DIR=$cache_dir JAX_COMPILATION_CACHE_DIR='' \
    setsid ${timeout_cmd[@]+"${timeout_cmd[@]}"} "${pin[@]}" "${CMD[@]}" >"$1" 2>&1 </dev/null &
  wait_child $!
  rm -rf "$cache_dir"
}

outcome() {  # outcome RC ELAPSED_MS: OUTCOME, the words for the progress line, and KIND: what to count it as
  KIND=failed OUTCOME="failed (exit $1)"
  if (($1 == 0)); then
    KIND=completed OUTCOME=completed
  elif [[ -n $TIMEOUT ]] && (($1 == 124 || ($1 == 128 + 9 && $2 >= $(to_ms "$TIMEOUT")))); then
    # timeout's 124: the run ended after its SIGTERM (it saved an "interrupted" summary); 137 after the time limit:
    # it was still running --kill-after seconds later, and got SIGKILL (maybe after writing its summary)
    OUTCOME="timed out (--timeout $TIMEOUT$( (($1 == 124)) || echo ", killed ${KILL_AFTER}s later"))"
  elif ((INTERRUPTED)); then
    KIND=interrupted OUTCOME=interrupted
  elif (($1 == 128 + 2 || $1 == 128 + 15)); then  # the scripts' exit 130 after a SIGINT or SIGTERM, or died of one
    KIND=interrupted OUTCOME="interrupted (exit $1: a SIGINT or SIGTERM reached the run alone)"
  fi
}

sweep() {  # the plan's runs, one process each; per run: done|todo, description, log stem, cell, N, its N words
  local i=5 n state log k=0 ran_ms=0 ran=0 start end cell=""
  declare -A COUNT=([completed]=0 [failed]=0 [skipped]=0 [interrupted]=0)
  while ((i < ${#PLAN[@]})) && ((!INTERRUPTED)); do
    if [[ ${PLAN[i + 3]} != "$cell" ]]; then cell=${PLAN[i + 3]}; claim_cell "$i"; fi  # a cell's first run
    state=${PLAN[i]} log=$LOG_DIR/${PLAN[i + 2]} n=${PLAN[i + 4]}
    printf '[%d/%d] %s ... ' $((k += 1)) "$NUM_RUNS" "${PLAN[i + 1]}"
    CMD=("${PLAN[@]:i + 5:n}")
    i=$((i + 5 + n))
    if [[ $state != todo ]]; then  # taken: claim_cell found it completed
      COUNT[skipped]=$((COUNT[skipped] + 1)) && echo "skipped (completed ${WHEN[$state]})" && continue
    fi
    if ((INTERRUPTED)); then echo "not started"; break; fi  # right before the run: no new run after Ctrl-C
    log+=__$(date +%s).log start=$(now_ms)
    execute "$log"
    end=$(now_ms)
    ran=$((ran + 1)) ran_ms=$((ran_ms + end - start))
    outcome "$RC" $((end - start))
    echo "$OUTCOME in $(fmt_ms $((end - start))) | ETA $(fmt_ms $((ran_ms / ran * (NUM_TODO - ran))))"
    [[ $KIND == interrupted ]] && ((INTERRUPTED)) || COUNT[$KIND]=$((COUNT[$KIND] + 1))  # the sweep's own: not
    if ((RC != 0)); then echo "    log: $log"; tail -n 3 -- "$log" | sed 's/^/    | /'; fi
  done
  release_cell
  echo "${COUNT[completed]} completed, ${COUNT[failed]} failed, ${COUNT[skipped]} skipped$(
    ((!COUNT[interrupted])) || echo ", ${COUNT[interrupted]} interrupted")"
  stop_if_interrupted
  ((COUNT[failed] + COUNT[interrupted] == 0)) || exit 1
}

# ------------------------------------------------------------------------------------------ Slurm
submit() {  # --slurm: python -m sweep writes the job array's sbatch script; this submits it (or prints it: --dry-run)
  local out script slurm_dir=$LOG_DIR/logs/slurm file job
  capture out sweep_py sbatch || exit $?  # python -m sweep said why (exit 2: a bad option)
  read -r NUM_RUNS NUM_TODO NUM_CELLS NUM_TASKS <<<"${out%%$'\n'*}"
  script=${out#*$'\n'}
  if [[ $MODE == slurm-dry-run ]]; then
    printf '%s\n' "$script"
    echo "dry run: sbatch script of $NUM_TASKS array tasks for $NUM_RUNS runs ($((NUM_RUNS - NUM_TODO)) already" \
         "completed) in $NUM_CELLS cells; nothing submitted"
    return
  fi
  if ((NUM_TODO == 0)); then
    echo "all $NUM_RUNS runs of this sweep are completed in $LOG_DIR: nothing to submit"; return
  fi
  mkdir -p -- "$slurm_dir"  # Slurm writes the tasks' output there: it must exist before a task starts
  file=$slurm_dir/benchback_$(date +%Y%m%d-%H%M%S).sbatch
  printf '%s\n' "$script" >"$file"
  capture job run_child sbatch --parsable -- "$file" || {
    rm -f "$file" && rmdir -- "$slurm_dir" "$LOG_DIR/logs" "$LOG_DIR" 2>/dev/null || true  # only what is empty
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
  # the interpreter that reads the command line (--python, the runs' interpreter, is one of the options)
  BOOT=$(command -v python3 || command -v python) || die "python3 was not found: bench.sh reads its options with it"
  reset_ignored_signals "$@"
  trap on_signal INT TERM  # from here on, a signal stops the child in progress (run_child), then bench.sh
  trap remove_captured EXIT
  local settings
  capture -a settings run_child "$BOOT" -m sweep args "$@" || exit $?  # sweep/bench.py's FIELDS, then words
  MODE=${settings[0]}; if [[ $MODE == help ]]; then printf '%s' "${settings[1]}"; exit 0; fi
  LOG_DIR=${settings[1]} PYTHON=${settings[2]} TIMEOUT=${settings[3]} KILL_AFTER=${settings[4]}
  TIMEOUT_BIN=${settings[5]} CPUS=${settings[6]} CPU_LIST=${settings[7]} ENV_TIMING_FILE=${settings[8]}
  ENV_THREADS=${settings[9]} SWEEP_WORDS=("${settings[@]:10}")
  case $MODE in
    slurm*) submit; return ;;
    dry-run) sweep_py dry-run; return ;;
  esac
  capture SHARD sweep_py check || exit $?  # exit 2 names a bad option, before anything is made
  mkdir -p -- "$LOG_DIR" 2>/dev/null || die "cannot make --log-dir ${LOG_DIR@Q}; give one you may write to"
  lock_log_dir
  capture -a PLAN sweep_py plan || exit $?  # the header RUNS, TO_RUN, CELLS, MATRIX_SIZE, K/N, then per run (see sweep)
  NUM_RUNS=${PLAN[0]} NUM_TODO=${PLAN[1]} NUM_CELLS=${PLAN[2]} MATRIX_SIZE=${PLAN[3]} SHARD=${PLAN[4]}
  time_envs_first
  echo "sweep: $NUM_RUNS runs ($NUM_TODO to run) in $NUM_CELLS cells, of $MATRIX_SIZE runs in the matrix," \
       "into $LOG_DIR (shard $SHARD); every run on cores ${CPU_LIST:-(any)} with $CPUS threads"
  sweep
}

# one line: bash reads a script as it runs, so an edit of this file during a sweep must not reach it after main
main "$@"; exit

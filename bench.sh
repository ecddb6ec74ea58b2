#!/usr/bin/env bash
# bench.sh: runs the experiment matrix of benchback-rl (see DESIGN.md), one fresh process per run.
# Resumable (a completed run is skipped) and shardable (--shard K/N). ./bench.sh --help for the options.
set -euo pipefail

HERE=$(dirname "$0")
STUDY_ENVS="CartPole-v1,Acrobot-v1,MountainCar-v0,DiscountingChain-bsuite,MemoryChain-bsuite,UmbrellaChain-bsuite,\
BernoulliBandit-misc,GaussianBandit-misc,Asterix-MinAtar,Breakout-MinAtar,Freeway-MinAtar,SpaceInvaders-MinAtar"  # = env_timing.STUDY_ENVS
ALL_EXPERIMENTS="exp1,exp2,exp3"
ALL_FRAMEWORKS="linen,nnx,torch"
ALL_SIZES="small,medium,large"
EXP3_ENV="Acrobot-v1"
KILL_AFTER_S=60  # after --timeout, a run gets SIGTERM (it saves its summary), then SIGKILL this much later

usage() {
  cat <<'EOF'
usage: ./bench.sh [options] [-- extra args passed to every run]

Runs the benchback-rl experiments (DESIGN.md), one fresh process per run, into {log-dir}/{exp}/.
A run whose folder already holds a completed summary.json with the same settings is skipped, so an
interrupted sweep resumes where it stopped. Each run's output goes to {log-dir}/logs/{exp}/.

  exp1  envs x sizes x frameworks (default compile mode), --no-sync-timing   (12 x 3 x 3 = 108 per seed)
  exp2  envs x small x the 8 compile modes, sync timing on                   (12 x 1 x 8 =  96 per seed)
  exp3  Acrobot-v1 x sizes x the 8 compile modes, sync timing on              ( 1 x 3 x 8 =  24 per seed)
  exp4  is exp1 under another --tag (e.g. the OS or the machine)

options:
  --experiments LIST  comma-separated experiments (default exp1,exp2,exp3)
  --frameworks LIST   comma-separated frameworks (default linen,nnx,torch)
  --envs LIST         comma-separated gymnax env ids (default: the 12 envs of the study)
  --sizes LIST        comma-separated model sizes (default small,medium,large)
  --seeds N           repeats, seeds 1..N (default 3)
  --iterations N      num_iterations of every run (default: the scripts' own, 100)
  --tag TAG           label of every run, e.g. the machine (default: the scripts' own, "default")
  --log-dir DIR       the runs folder (default runs)
  --timeout SECONDS   stop a run after this long (SIGTERM, so it saves an "interrupted" summary)
  --shard K/N         run only every N-th run of the matrix, starting at run K (K in 0..N-1)
  --python PATH       the Python interpreter (default python)
  --no-env-timing     do not run env_timing.py first when results/env_timing.json is missing
  --dry-run           print one command per run and the count; run nothing
  -h, --help          show this help

examples:
  ./bench.sh --experiments exp1 --tag linux-h200
  ./bench.sh --shard 0/2 & ./bench.sh --shard 1/2    # two machines or GPUs, one sweep
  ./bench.sh --envs CartPole-v1 --sizes small --seeds 1 --iterations 2 -- --num-envs 4 --num-steps 16
EOF
}

die() {  # one line on stderr, exit 2 (bad input)
  echo "bench.sh: $*" >&2
  exit 2
}

# ---------------------------------------------------------------------------------------- options
EXPERIMENTS=$ALL_EXPERIMENTS FRAMEWORKS=$ALL_FRAMEWORKS ENVS=$STUDY_ENVS SIZES=$ALL_SIZES SEEDS=3
ITERATIONS="" TAG="" LOG_DIR=runs TIMEOUT="" SHARD=0/1 PYTHON=python ENV_TIMING=1 DRY_RUN=0
EXTRA=()

set_option() {  # set_option --name value
  case $1 in
    --experiments) EXPERIMENTS=$2 ;;
    --frameworks) FRAMEWORKS=$2 ;;
    --envs) ENVS=$2 ;;
    --sizes) SIZES=$2 ;;
    --seeds) SEEDS=$2 ;;
    --iterations) ITERATIONS=$2 ;;
    --tag) TAG=$2 ;;
    --log-dir) LOG_DIR=$2 ;;
    --timeout) TIMEOUT=$2 ;;
    --shard) SHARD=$2 ;;
    --python) PYTHON=$2 ;;
    *) die "unknown option '$1'; valid options: --experiments --frameworks --envs --sizes --seeds --iterations" \
           "--tag --log-dir --timeout --shard --python --no-env-timing --dry-run --help (then -- extra run args)" ;;
  esac
}

parse_args() {
  while (($#)); do
    case $1 in
      -h | --help) usage; exit 0 ;;
      --dry-run) DRY_RUN=1 ;;
      --no-env-timing) ENV_TIMING=0 ;;
      --) shift; EXTRA=("$@"); return ;;
      --*=*) set_option "${1%%=*}" "${1#*=}" ;;
      *)
        set_option "$1" ""  # dies on an unknown option
        (($# >= 2)) || die "option $1 needs a value"
        set_option "$1" "$2"
        shift ;;
    esac
    shift
  done
}

check_choices() {  # check_choices OPTION LIST VALID: every item of the comma-separated LIST is in VALID
  local item
  [[ -n $2 ]] || die "$1 is empty; valid choices: ${3//,/, }"
  for item in ${2//,/ }; do
    [[ ,$3, == *,$item,* ]] || die "unknown value '$item' in $1; valid choices: ${3//,/, }"
  done
}

check_positive_int() {  # check_positive_int OPTION VALUE
  [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"
}

check_args() {
  EXPERIMENTS=${EXPERIMENTS// /} FRAMEWORKS=${FRAMEWORKS// /} ENVS=${ENVS// /} SIZES=${SIZES// /}
  check_choices --experiments "$EXPERIMENTS" "$ALL_EXPERIMENTS"
  check_choices --frameworks "$FRAMEWORKS" "$ALL_FRAMEWORKS"
  check_choices --sizes "$SIZES" "$ALL_SIZES"
  [[ -n $ENVS ]] || die "--envs is empty; give comma-separated gymnax env ids"  # the runs check the names
  check_positive_int --seeds "$SEEDS"
  [[ -z $ITERATIONS ]] || check_positive_int --iterations "$ITERATIONS"
  [[ $SHARD =~ ^([0-9]+)/([1-9][0-9]*)$ ]] || die "--shard must be K/N with 0 <= K < N, got '$SHARD'"
  SHARD_K=${BASH_REMATCH[1]} SHARD_N=${BASH_REMATCH[2]}
  ((SHARD_K < SHARD_N)) || die "--shard must be K/N with 0 <= K < N, got '$SHARD'"
  if [[ -n $TIMEOUT ]]; then
    [[ $TIMEOUT =~ ^[0-9]*\.?[0-9]+$ && ! $TIMEOUT =~ ^[0.]+$ ]] || die "--timeout must be a positive number of seconds, got '$TIMEOUT'"
    TIMEOUT_BIN=$(command -v timeout || command -v gtimeout) || die "--timeout needs GNU timeout (coreutils), not found"
  fi
  ((DRY_RUN)) || command -v "$PYTHON" >/dev/null || die "--python '$PYTHON' is not an executable; give a Python interpreter"
}

# ----------------------------------------------------------------------------------------- matrix
compile_modes() {  # compile_modes FRAMEWORK: its compile choices, the default first
  case $1 in
    linen) echo "jit none" ;;
    nnx) echo "cached_partial jit none" ;;
    torch) echo "compile env-jit none" ;;
  esac
}

exp_envs() {  # the envs of an experiment: exp3 is Acrobot-v1 only (when it is among --envs)
  if [[ $1 != exp3 ]]; then echo "${ENVS//,/ }"; elif [[ ,$ENVS, == *,$EXP3_ENV,* ]]; then echo "$EXP3_ENV"; fi
}

exp_sizes() {  # the sizes of an experiment: exp2 is small only (when it is among --sizes)
  if [[ $1 != exp2 ]]; then echo "${SIZES//,/ }"; elif [[ ,$SIZES, == *,small,* ]]; then echo small; fi
}

exp_modes() {  # exp_modes EXP FRAMEWORK: exp1 uses the default compile mode, exp2 and exp3 all of them
  local modes
  modes=$(compile_modes "$2")
  if [[ $1 == exp1 ]]; then echo "${modes%% *}"; else echo "$modes"; fi
}

build_matrix() {  # RUNS: one "exp env framework size compile seed" per run, this shard's share
  local exp seed env size framework mode index=0
  RUNS=()
  for exp in ${EXPERIMENTS//,/ }; do
    for ((seed = 1; seed <= SEEDS; seed++)); do
      for env in $(exp_envs "$exp"); do
        for size in $(exp_sizes "$exp"); do
          for framework in ${FRAMEWORKS//,/ }; do  # innermost: frameworks and modes side by side in time
            for mode in $(exp_modes "$exp" "$framework"); do
              if ((index % SHARD_N == SHARD_K)); then RUNS+=("$exp $env $framework $size $mode $seed"); fi
              index=$((index + 1))
            done
          done
        done
      done
    done
  done
  MATRIX_SIZE=$index
}

run_command() {  # run_command EXP ENV FRAMEWORK SIZE MODE SEED: sets CMD, the command of the run
  CMD=("$PYTHON" "$HERE/ppo_$3.py" --env "$2" --model-size "$4" --compile "$5" --seed "$6" --log-dir "$LOG_DIR/$1")
  if [[ -n $ITERATIONS ]]; then CMD+=(--num-iterations "$ITERATIONS"); fi
  if [[ -n $TAG ]]; then CMD+=(--tag "$TAG"); fi
  if [[ $1 == exp1 ]]; then CMD+=(--no-sync-timing); fi
  CMD+=(${EXTRA[@]+"${EXTRA[@]}"})
}

# ----------------------------------------------------------------------------------------- resume
# A run is done when one of its folders has summary.json status "completed" and its config.json agrees
# with every setting of the command: the options given, and the script's Args defaults for the others.
read -r -d '' RESUME_CHECK <<'EOF' || true  # (read returns 1 at the end of the text)
import ast, json, os, sys
n = int(sys.argv[1])
summaries, (script, *cli) = sys.argv[2 : 2 + n], sys.argv[2 + n :]
IGNORED = {"exp_name", "log_dir", "track", "wandb_project_name", "wandb_entity",
           "device"}  # config.json "device" is the device used (e.g. "NVIDIA H200"), not the --device choice of ppo_torch.py

def script_defaults(path):  # the literal defaults of the Args dataclass, read without importing the script
    tree = ast.parse(open(path).read())
    args = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Args")
    out = {}
    for node in args.body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            try:
                out[node.target.id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out

def parse_cli(cli, defaults):  # --name value, --name=value, --flag, --no-flag -> {name: value}
    out, i = {}, 0
    while i < len(cli):
        name, eq, value = cli[i][2:].partition("=")
        name = name.replace("-", "_")
        if not eq and name.startswith("no_") and isinstance(defaults.get(name[3:]), bool):
            name, value = name[3:], False
        elif not eq and isinstance(defaults.get(name), bool):
            value = True
        elif not eq:
            i += 1
            value = cli[i] if i < len(cli) else ""
        out[name] = value
        i += 1
    return out

def same(have, want):
    if not isinstance(want, str) or isinstance(have, str) or have is None:
        return have == want
    if isinstance(have, bool):
        return str(have).lower() == want.lower()
    try:
        return float(have) == float(want)
    except ValueError:
        return False

def completed_with(run_dir, expected):
    try:
        with open(os.path.join(run_dir, "summary.json")) as f, open(os.path.join(run_dir, "config.json")) as g:
            summary, config = json.load(f), json.load(g)
    except (OSError, ValueError):
        return False
    return summary.get("status") == "completed" and all(
        same(config.get(k), v) for k, v in expected.items() if k not in IGNORED)

defaults = script_defaults(script) if os.path.exists(script) else {}
expected = {**defaults, **parse_cli(cli, defaults)}
sys.exit(0 if any(completed_with(os.path.dirname(s), expected) for s in summaries) else 1)
EOF

is_done() {  # is_done EXP ENV FRAMEWORK SIZE MODE SEED (with CMD set): a completed run with these settings exists
  local summaries=() summary
  for summary in "$LOG_DIR/$1/$2__$3__$4__$5__$6__"*/summary.json; do
    if [[ -e $summary ]]; then summaries+=("$summary"); fi
  done
  ((${#summaries[@]})) || return 1
  "$PYTHON" -c "$RESUME_CHECK" "${#summaries[@]}" "${summaries[@]}" "${CMD[@]:1}"
}

# ------------------------------------------------------------------------------------------ sweep
describe() {  # describe EXP ENV FRAMEWORK SIZE MODE SEED
  echo "$1 $2 $3 $4 $5 seed $6"
}

log_path() {  # log_path EXP ENV FRAMEWORK SIZE MODE SEED: a new log file of the run
  echo "$LOG_DIR/logs/$1/$2__$3__$4__$5__$6__$(date +%s).log"
}

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

CHILD="" INTERRUPTED=0
on_signal() {  # Ctrl-C or SIGTERM: stop the current run (it saves an "interrupted" summary), then the sweep
  INTERRUPTED=1
  if [[ -n $CHILD ]]; then kill -TERM "$CHILD" 2>/dev/null || true; fi
}

execute() {  # execute LOG: runs CMD in the background (so that signals reach us), output to LOG; sets RC
  local timeout_cmd=()
  if [[ -n $TIMEOUT ]]; then timeout_cmd=("$TIMEOUT_BIN" --kill-after="$KILL_AFTER_S" "$TIMEOUT"); fi
  mkdir -p "$(dirname "$1")"
  # a fresh process also gets a fresh TorchInductor cache: no run reuses kernels another run compiled
  local cache_dir
  cache_dir=$(mktemp -d)
  TORCHINDUCTOR_CACHE_DIR=$cache_dir ${timeout_cmd[@]+"${timeout_cmd[@]}"} "${CMD[@]}" >"$1" 2>&1 &
  CHILD=$!
  RC=0
  wait "$CHILD" || RC=$?
  if ((INTERRUPTED)); then  # wait returned on the signal: wait again for the run to save its summary
    RC=130
    wait "$CHILD" 2>/dev/null || true
  fi
  CHILD=""
  rm -rf "$cache_dir"
}

outcome() {  # outcome RC: words for the progress line
  case $1 in
    0) echo completed ;;
    124) echo "timed out (--timeout $TIMEOUT)" ;;
    130) echo interrupted ;;
    *) echo "failed (exit $1)" ;;
  esac
}

time_envs_first() {  # env_timing.py when its results are missing
  local out="$HERE/results/env_timing.json"
  if ((DRY_RUN || !ENV_TIMING)) || [[ -e $out ]]; then return 0; fi
  echo "measuring the env step costs first ($out; --no-env-timing skips this)"
  "$PYTHON" "$HERE/env_timing.py" --out "$out" || echo "bench.sh: warning: env_timing.py failed; the sweep goes on" >&2
}

dry_run() {
  local run line done=0
  for run in ${RUNS[@]+"${RUNS[@]}"}; do
    run_command $run
    line=$(printf '%q ' "${CMD[@]}")
    if is_done $run; then line="# done: $line" done=$((done + 1)); fi
    echo "${line% }"
  done
  echo "dry run: ${#RUNS[@]} runs ($done already completed) of $MATRIX_SIZE in the matrix, shard $SHARD_K/$SHARD_N"
}

sweep() {
  local run k=0 total=${#RUNS[@]} completed=0 failed=0 skipped=0 ran_ms=0 ran=0 start end log eta
  for run in ${RUNS[@]+"${RUNS[@]}"}; do
    if ((INTERRUPTED)); then break; fi
    k=$((k + 1))
    run_command $run
    printf '[%d/%d] %s ... ' "$k" "$total" "$(describe $run)"
    if is_done $run; then
      skipped=$((skipped + 1))
      echo "skipped (completed earlier)"
      continue
    fi
    log=$(log_path $run)
    start=$(now_ms)
    execute "$log"
    end=$(now_ms)
    ran=$((ran + 1)) ran_ms=$((ran_ms + end - start))
    eta=$(fmt_ms $((ran_ms / ran * (total - k))))
    echo "$(outcome "$RC") in $(fmt_ms $((end - start))) | ETA $eta"
    if ((RC == 0)); then completed=$((completed + 1)); else
      if ((!INTERRUPTED)); then failed=$((failed + 1)); fi
      echo "    log: $log"
      tail -n 3 "$log" | sed 's/^/    | /'
    fi
  done
  echo "$completed completed, $failed failed, $skipped skipped"
  if ((INTERRUPTED)); then
    echo "interrupted: run the same command again to resume" >&2
    exit 130
  fi
  ((failed == 0)) || exit 1
}

main() {
  parse_args "$@"
  check_args
  build_matrix
  if ((DRY_RUN)); then dry_run; return; fi
  trap on_signal INT TERM
  time_envs_first
  echo "sweep: ${#RUNS[@]} runs of $MATRIX_SIZE in the matrix (shard $SHARD_K/$SHARD_N) into $LOG_DIR"
  sweep
}

main "$@"

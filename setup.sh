#!/usr/bin/env bash
# setup.sh: benchback-rl's Python environment in .venv, from the pinned versions of requirements.lock.
#
#   ./setup.sh demo              # set up, then train ppo_nnx.py on Acrobot-v1 (small model)
#   ./setup.sh test [ARGS]       # set up, then the whole test suite (python -m pytest -q ARGS)
#   ./setup.sh run CMD [ARGS]    # set up, then run CMD inside .venv, in the folder you call it from
#   ./setup.sh starter FW DIR    # a new project in DIR: ppo_FW.py without the benchmark bookkeeping, and the
#                                # files it needs (python -m tools.starter; nothing installed)
#   ./setup.sh                   # set up only
#   ./setup.sh lock              # regenerate requirements.lock from requirements.txt (pip-tools)
#
# Setting up makes .venv with Python 3.11 ($PYTHON, which must be one; else python3.11, else python3 if it is 3.11) and installs
# torch, then every other package at the version requirements.lock pins. It does nothing when .venv already
# holds that lock for that torch. Then MuJoCo Playground (env_adapters.py's playground-* envs) without its declared
# dependencies (setup.sh's NO_DEPS): the lock has the others; warp-lang (149 MB: Warp's physics) and mediapy (notebook videos)
# are left out, since env_adapters.py runs Playground's pure-JAX physics. torch is not in the lock because its build
# depends on the machine:
#   - no NVIDIA GPU (nvidia-smi finds none): torch's CPU build, from https://download.pytorch.org/whl/cpu
#     (where that index cannot be reached: from the default index, said in one line; on Linux that is the
#     CUDA build, several GB);
#   - an NVIDIA GPU: torch's CUDA build (PyPI's) and JAX's CUDA 12 plugin.
# BENCHBACK_TORCH=cpu or BENCHBACK_TORCH=cuda chooses instead of nvidia-smi (to change the build of an existing
# .venv, delete .venv first).
set -euo pipefail
CALLER_DIR=$PWD  # where `run CMD` runs: CMD's relative paths mean what the caller meant
cd "$(dirname "$0")"
ROOT=$PWD

VENV=.venv
LOCK=requirements.lock
STAMP=$VENV/.benchback-setup
CPU_INDEX=https://download.pytorch.org/whl/cpu
PIP_TOOLS=pip-tools==7.5.2
NO_DEPS=(playground==0.2.0)  # installed with --no-deps after the lock (the header says why)

say() {
  echo "setup.sh: $*" >&2
}

die() {
  say "$*"
  exit 2
}

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

# The Python 3.11 to make a venv with: $PYTHON when set (never passed over for another), else the first of
# python3.11 and python3 that is 3.11.
find_python() {
  local candidate
  if [[ -n ${PYTHON:-} ]]; then
    check_python "$PYTHON"
    echo "$PYTHON"
    return
  fi
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && [[ $(python_version "$candidate") == 3.11 ]]; then
      echo "$candidate"
      return
    fi
  done
  die "no Python 3.11 found (tried python3.11, python3); set PYTHON=/path/to/python3.11"
}

python_version() {  # "3.11", or nothing when $1 is not a Python that runs
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

check_python() {  # $PYTHON must be a Python 3.11: else one line that names it, exit 2
  local version
  command -v -- "$1" >/dev/null || die "PYTHON=${1@Q} is not found; set PYTHON to a Python 3.11, or unset it"
  version=$(python_version "$1")
  [[ $version == 3.11 ]] ||
    die "PYTHON=${1@Q} is ${version:+Python }${version:-not a Python that runs}, not 3.11; set PYTHON to a" \
      "Python 3.11, or unset it"
}

# The pinned torch version, read from requirements.txt's "torch==X" line.
torch_pin() {
  local line
  line=$(grep -E '^torch==' requirements.txt) || die "requirements.txt has no torch==VERSION line"
  echo "${line%%[[:space:]#]*}"
}

# The version requirements.lock pins for package $1.
locked_version() {
  local line
  line=$(grep -iE "^$1==" "$LOCK") || die "$LOCK pins no $1"
  line=${line%%[[:space:]#;]*}
  echo "${line#*==}"
}

torch_build() {
  local choice=${BENCHBACK_TORCH:-}
  case $choice in
    cpu | cuda)
      echo "$choice"
      ;;
    "")
      if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        echo cuda
      else
        echo cpu
      fi
      ;;
    *)
      die "BENCHBACK_TORCH must be cpu or cuda, not '$choice'"
      ;;
  esac
}

# Whether a URL answers within 5 seconds (pip would retry an unreachable index for minutes).
reachable() {
  "$VENV/bin/python" - "$1" <<'EOF' 2>/dev/null
import sys
import urllib.request

urllib.request.urlopen(sys.argv[1], timeout=5)
EOF
}

install_torch() {
  local build=$1 pin
  pin=$(torch_pin)
  if [[ $build == cuda ]]; then
    say "installing $pin (CUDA build) and JAX's CUDA 12 plugin"
    "$VENV/bin/pip" install -q "$pin" "jax[cuda12]==$(locked_version jax)"
  elif reachable "$CPU_INDEX/torch/"; then
    say "installing $pin (CPU build, from $CPU_INDEX)"
    # its dependencies come from the lock, at the pinned versions
    "$VENV/bin/pip" install -q --no-deps --index-url "$CPU_INDEX" "$pin"
  else
    say "$CPU_INDEX cannot be reached: installing $pin from the default index instead"
    "$VENV/bin/pip" install -q "$pin"
  fi
}

# pip install ARGS: pip's whole output appended to a log; a line per package shows progress (pipefail keeps
# pip's exit status)
pip_install() {
  "$VENV/bin/pip" install --progress-bar off "$@" 2>&1 \
    | tee -a "$VENV/pip-install.log" \
    | awk '/^(Collecting|Successfully|ERROR)/ { print; fflush() }' >&2
}

stamp_text() {
  echo "lock $(sha256sum "$LOCK" requirements.txt | cut -d' ' -f1 | tr '\n' ' ')torch $1 $(torch_pin) ${NO_DEPS[*]}"
}

set_up() {
  local build
  build=$(torch_build)
  [[ -f $LOCK ]] || die "$LOCK is missing: ./setup.sh lock makes it"
  if [[ -f $STAMP && $(cat "$STAMP") == "$(stamp_text "$build")" ]]; then
    return
  fi
  local started=$SECONDS
  if [[ ! -x $VENV/bin/python ]]; then
    local python
    python=$(find_python)
    say "creating $VENV with $python"
    "$python" -m venv "$VENV"
  fi
  say "installing the pinned packages into $VENV (torch: $build build; a few minutes the first time)"
  install_torch "$build"
  rm -f "$VENV/pip-install.log"
  # requirements.txt too: what it asks for is then installed even where the lock lacks it (the tests refuse
  # such a lock: ./setup.sh lock)
  pip_install -r "$LOCK" -r requirements.txt
  pip_install --no-deps "${NO_DEPS[@]}"
  stamp_text "$build" >"$STAMP"
  say "set up in $((SECONDS - started)) s"
}

# pip-tools resolves with pip itself, in a throwaway venv: the lock is what pip installs on this kind of machine
# (Linux x86_64, Python 3.11).
make_lock() {
  local python tools
  python=$(find_python)
  tools=$(mktemp -d)
  "$python" -m venv "$tools"
  "$tools/bin/pip" install -q "$PIP_TOOLS"
  CUSTOM_COMPILE_COMMAND="./setup.sh lock" "$tools/bin/pip-compile" -q --strip-extras --unsafe-package torch --no-emit-index-url \
    --no-emit-find-links --output-file "$LOCK" requirements.txt
  rm -rf "$tools"
  say "wrote $LOCK"
}

# run CMD: in the caller's folder, CMD taken from .venv/bin by its path when it is there (python, pip, pytest, ...):
# a repository path holding ':' cannot be a PATH entry (PATH splits at ':'). What CMD starts finds .venv/bin first
# on PATH, where the path allows.
run_in_venv() {
  local program=$1 bin=$ROOT/$VENV/bin
  if [[ $program != */* && -x $bin/$program ]]; then program=$bin/$program; fi
  if [[ $bin == *:* ]]; then
    say "warning: the repository's path holds ':', which PATH cannot hold: the programs $1 starts find python" \
      "on PATH as it is, not in $VENV"
  else
    export PATH="$bin:$PATH"
  fi
  export VIRTUAL_ENV=$ROOT/$VENV
  cd -- "$CALLER_DIR"
  exec "$program" "${@:2}"
}

# starter FRAMEWORK DIR: tools/starter.py, which needs only the standard library (.venv's Python when there is
# one); DIR as the caller means it.
starter() {
  local dir=$2 python=$VENV/bin/python
  [[ $dir == /* ]] || dir=$CALLER_DIR/$dir
  [[ -x $python ]] || python=$(find_python)
  exec "$python" -m tools.starter "$1" "$dir"
}

main() {
  local command=${1:-}
  [[ $# -gt 0 ]] && shift
  case $command in
    "")
      set_up
      ;;
    demo)
      set_up
      exec "$VENV/bin/python" ppo_nnx.py --env Acrobot-v1 --model-size small "$@"
      ;;
    test)
      set_up
      exec "$VENV/bin/python" -m pytest -q "$@"
      ;;
    run)
      [[ $# -gt 0 ]] || die "run needs a command, e.g. ./setup.sh run python ppo_linen.py --env CartPole-v1"
      set_up
      run_in_venv "$@"
      ;;
    lock)
      make_lock
      ;;
    starter)
      [[ $# -eq 2 ]] || die "starter needs FRAMEWORK DIR, e.g. ./setup.sh starter nnx ../my-ppo"
      starter "$@"
      ;;
    -h | --help)
      usage
      ;;
    *)
      die "unknown command '$command' (choose demo, test, run, starter, lock, or none; --help)"
      ;;
  esac
}

main "$@"

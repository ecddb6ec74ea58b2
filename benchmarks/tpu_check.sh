#!/usr/bin/env bash
# The TPU check: the accelerator edition's runner, run on a machine with a TPU chip from the repository root.
#   machine  what the machine is: JAX's devices, the package versions, the host's cores;
#   smoke    a tiny CartPole-v1 run of each JAX script on the chip (a script that cannot run there stops the check);
#   chip     study.toml's preset "accelerator" on the chip (exp1: CartPole-v1 and SpaceInvaders-MinAtar, every size,
#            Linen, NNX and Equinox, 3 seeds, 20 iterations), tag tpu-v5e;
#   host     the same cells on the host's CPU (JAX_PLATFORMS=cpu), torch included, tag tpu-v5e-host: the reference
#            column, never paired with the chip's runs (a speedup never compares two devices);
#   parts    (only when asked for) where iteration 0's compilation goes on the chip, piece by piece
#            (benchmarks/compile_parts.py), CartPole-v1 small and large: $OUT/parts/*.json and .md;
#   purejaxrl (only when asked for) PureJaxRL side by side on the chip (benchmarks/purejaxrl.py --shims: its
#            ppo.py on our JAX): the whole process, then CleanRL's batch at one agent (500 iterations, ours as a
#            user trains: --fast-only), 2 rounds each: $OUT/purejaxrl/{whole,one_agent}.json and .md.
#            PUREJAXRL_DIR: a PureJaxRL git checkout carried to the machine;
#   purejaxrl_many (only when asked for) the same at 256, 1,024 and 4,096 agents (40 iterations, one round: a
#            window holds about 12 processes of ~40 s): $OUT/purejaxrl/scaling.json and .md;
#   playground (only when asked for) study.toml's preset "playground" on the chip (exp5 on three of MuJoCo
#            Playground's DM Control envs, the JAX frameworks, 3 seeds, 20 iterations, the small model), tag tpu-v5e;
#   anchor   (only when asked for) Brax's own PPO with Playground's published config on CartpoleBalance, then
#            CheetahRun (benchmarks/brax_ppo.py, each evaluation saved as it comes): $OUT/anchor/*.json and .md;
#   batch    (only when asked for) where the chip starts to pay: ppo_linen.py, CartPole-v1 small, --num-envs 4 ..
#            16,384 on the chip, then 4 .. 4,096 on the host's CPU (benchmarks/batch_sweep.py, a fresh process
#            each, the whole process counted): $RUNS/batch/{chip,host}.json and .md, taken up again by a later call;
#   learning (only when asked for) time to CleanRL's return on the chip (exp9's ppo.py configuration, CartPole-v1
#            and Acrobot-v1, the JAX frameworks, 3 seeds) at JAX's default matmul precision (tag tpu-v5e) and at
#            `highest` (tag tpu-v5e-highest): $RUNS/learning/{default,highest}.
#   nnx      (only when asked for) NNX's graph and tree modes beside Linen where calls are short: CleanRL's batch, one
#            agent, sync timing off (benchmarks/jax_vs_linen.py, 2 rounds): $OUT/nnx/cleanrl.json.
# A lent chip comes in windows of minutes, one command at most 10: every step stops at DEADLINE seconds from the
# start (default 540), and bench.sh resumes a sweep where it stopped, so the same command run again goes on. Runs
# land in $RUNS (default $OUT/runs); runs kept from an earlier call (RESUME_FROM, default results/tpu-v5e/runs)
# are copied in first, so that their cells are skipped. At the end $OUT/runs.tar.gz holds every run folder and log,
# and $OUT/records.tar.gz every step's log and record (machine.log, purejaxrl/, parts/, ...). ARCHIVES_ONLY=1 then
# leaves only check.txt and the two archives in $OUT: a machine that hands back a few files hands back everything.
# MuJoCo Playground's envs (env_adapters.py's playground-*) need wheels beyond the shared prepare.sh's list (its
# arguments add them to .whl-tpu/; what loading, resetting and stepping one imports, less mujoco-studio and glfw, which
# nothing imports): playground==0.2.0 lxml==6.2.1 brax==0.14.2 jaxopt==0.8.5 ml-collections==1.1.0 mujoco==4.0.0
# mujoco-core==4.0.0 mujoco-mjx==3.17.0 trimesh==5.2.0 tqdm==4.70.1. They are 30 MiB: with the tree's 37 MiB, over the
# 64 MiB a call carries, so take from the machine's own index (file:///opt/pypi/simple) the ones it has first.
# Usage: OUT=tpu_check bash benchmarks/tpu_check.sh [STEP ...]   (default: machine smoke chip host)
#        DRY_RUN=1 ...: prints each step's command and runs nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-tpu_check}
PY=${PYTHON:-python3}
DEADLINE=${DEADLINE:-540}
RUNS=${RUNS:-$OUT/runs}
RESUME_FROM=${RESUME_FROM:-results/tpu-v5e/runs}
TAG=${TAG:-tpu-v5e}
TINY=(--env CartPole-v1 --num-envs 4 --num-steps 16 --num-iterations 3 --update-epochs 2 --num-minibatches 2)
STEPS=("$@")
ALL_STEPS="machine smoke chip host parts purejaxrl purejaxrl_many playground anchor batch learning nnx"
if ((${#STEPS[@]} == 0)); then STEPS=(machine smoke chip host); fi
START=$SECONDS

step() {  # step NAME COMMAND...: runs it until the deadline, logs to $OUT/NAME.log, records its exit code
  local name=$1 left=$((DEADLINE - (SECONDS - START)))
  shift
  if [[ -n ${DRY_RUN:-} ]]; then
    printf '%s:' "$name" && printf ' %q' "$@" && echo
    return 0
  fi
  if ((left <= 0)); then
    echo "$name: not started (the deadline, ${DEADLINE}s, has passed)" | tee -a "$OUT/check.txt"
    return 1
  fi
  timeout --kill-after=30 "$left" "$@" >"$OUT/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - START))s" | tee -a "$OUT/check.txt"
}

machine() {
  step machine "$PY" -c "import jax, platform, os; print(jax.devices(), jax.__version__,
platform.platform(), os.cpu_count())"
}

smoke() {
  local script
  for script in ppo_linen.py ppo_nnx.py ppo_equinox.py; do
    step "smoke_${script%.py}" "$PY" "$script" "${TINY[@]}" --log-dir "$OUT/smoke" || return 1
  done
}

chip() {
  step chip ./bench.sh --python "$PY" --preset accelerator --log-dir "$RUNS/chip" --tag "$TAG" \
    --no-env-timing --timeout 300
}

parts() {
  local size
  for size in small large; do
    step "parts_$size" "$PY" -m benchmarks.compile_parts --env CartPole-v1 --model-size "$size" \
      --out "$OUT/parts/CartPole-v1-$size.json" || return 1
  done
}

purejaxrl() {
  local common=(--purejaxrl-dir "$PUREJAXRL_DIR" --shims --rounds 2
    --work-dir "$OUT/purejaxrl-work")
  step purejaxrl_whole "$PY" -m benchmarks.purejaxrl "${common[@]}" --mode whole \
    --out "$OUT/purejaxrl/whole.json" || return 1
  step purejaxrl_one_agent "$PY" -m benchmarks.purejaxrl "${common[@]}" --configs cleanrl \
    --agents 1 --iterations 500 --fast-only --out "$OUT/purejaxrl/one_agent.json"
}

purejaxrl_many() {
  step purejaxrl_many "$PY" -m benchmarks.purejaxrl --purejaxrl-dir "$PUREJAXRL_DIR" --shims \
    --rounds 1 --work-dir "$OUT/purejaxrl-work" --configs cleanrl --agents 256 1024 4096 \
    --iterations 40 --fast-only --out "$OUT/purejaxrl/scaling.json"
}

playground() {
  step playground ./bench.sh --python "$PY" --preset playground --log-dir "$RUNS/playground" \
    --tag "$TAG" --no-env-timing --timeout 300
}

anchor() {
  local env
  for env in CartpoleBalance CheetahRun; do
    step "anchor_$env" "$PY" -m benchmarks.brax_ppo --env "$env" \
      --out "$OUT/anchor/brax_ppo_$env.json" || return 1
  done
}

batch() {
  # the sweep stops itself 30 s before the step's deadline, keeping what it measured
  local left=$((DEADLINE - (SECONDS - START) - 30))
  step batch_chip "$PY" -m benchmarks.batch_sweep --deadline "$left" --out "$RUNS/batch/chip.json" ||
    return 1
  left=$((DEADLINE - (SECONDS - START) - 30))
  JAX_PLATFORMS=cpu step batch_host "$PY" -m benchmarks.batch_sweep --deadline "$left" \
    --num-envs 4 16 64 256 1024 4096 --out "$RUNS/batch/host.json"
}

learning() {
  local common=(--python "$PY" --experiments exp9 --envs CartPole-v1,Acrobot-v1
    --frameworks linen,nnx,equinox --seeds 3 --no-env-timing --timeout 300)
  step learning_default ./bench.sh "${common[@]}" --log-dir "$RUNS/learning/default" --tag "$TAG" ||
    return 1
  step learning_highest ./bench.sh "${common[@]}" --log-dir "$RUNS/learning/highest" \
    --tag "$TAG-highest" -- --matmul-precision highest
}

nnx() {
  step nnx_modes "$PY" -m benchmarks.jax_vs_linen --framework nnx --env CartPole-v1 \
    --configs "linen jit" "nnx cached_partial" "nnx tree" --rounds 2 --num-iterations 50 \
    --out "$OUT/nnx/cleanrl.json" -- --num-envs 4 --num-steps 128 --num-minibatches 4 \
    --update-epochs 4 --no-sync-timing
}

host() {
  JAX_PLATFORMS=cpu step host ./bench.sh --python "$PY" --experiments exp1 \
    --envs CartPole-v1,SpaceInvaders-MinAtar --compile-modes default --seeds 3 --iterations 20 \
    --log-dir "$RUNS/host" --tag "$TAG-host" --no-env-timing --timeout 300
}

for name in "${STEPS[@]}"; do
  case $name in
    machine | smoke | chip | host | parts | purejaxrl | purejaxrl_many | playground | anchor) ;;
    batch | learning | nnx) ;;
    *) echo "tpu_check.sh: unknown step '$name'; steps: $ALL_STEPS" >&2 && exit 2 ;;
  esac
  if [[ $name == purejaxrl* && ! -f ${PUREJAXRL_DIR:-}/purejaxrl/ppo.py ]]; then
    echo "tpu_check.sh: the $name step needs PUREJAXRL_DIR, a PureJaxRL checkout (got '${PUREJAXRL_DIR:-}')" >&2
    exit 2
  fi
done
if [[ -z ${DRY_RUN:-} ]]; then
  mkdir -p "$OUT" "$RUNS"
  if [[ -d $RESUME_FROM ]]; then cp -r "$RESUME_FROM/." "$RUNS/"; fi
fi
for name in "${STEPS[@]}"; do
  "$name" || break
done
pack() {  # the two archives, then (ARCHIVES_ONLY=1) nothing else but check.txt
  tar czf "$OUT/runs.tar.gz" -C "$RUNS" . || return 1
  tar czf "$OUT/records.tar.gz" -C "$OUT" --exclude=./runs.tar.gz --exclude=./records.tar.gz \
    --exclude=./runs . || return 1
  echo "wrote $OUT/runs.tar.gz and $OUT/records.tar.gz"
  if [[ -n ${ARCHIVES_ONLY:-} ]]; then
    find "$OUT" -mindepth 1 -maxdepth 1 ! -name check.txt ! -name runs.tar.gz ! -name records.tar.gz \
      -exec rm -rf {} +
  fi
}
if [[ -z ${DRY_RUN:-} ]]; then pack; fi

#!/usr/bin/env bash
# The GPU check: run it first on any machine with an NVIDIA GPU, from the repository root, before a GPU sweep.
#   1. what the machine is: nvidia-smi and the package versions;
#   2. a smoke test: a tiny CartPole-v1 run of every script in its default mode on the GPU, in float32 and
#      with --dtype bfloat16, and of ppo_torch.py --compile cudagraphs (the GPU-only mode), in both too;
#   3. the measurement that fits what is left: exp1, small, 4 envs x every framework, 1 seed, 20 iterations;
#   4. with LEANRL_DIR (a LeanRL checkout; its packages in $PYTHON), one round of benchmarks/leanrl.py, whose
#      configurations on a GPU include LeanRL's and ppo_torch.py's CUDA graphs;
#   5. agents per process to 1,024 (issue 57): every script with --num-agents 1, 16, 256, 1024 on CartPole-v1 with
#      CleanRL ppo.py's batch (exp11's flags, 12 iterations: the steady window is iterations 8+), each run's
#      summary.json (agent-steps/s, peak device bytes) in $OUT/scaling/; with PUREJAXRL_DIR (a PureJaxRL checkout),
#      one round of benchmarks/purejaxrl.py at the same N beside PureJaxRL's vmapped make_train (its venv is made
#      in $OUT/purejaxrl with jax's CUDA plugin, unless PUREJAXRL_PYTHON names an interpreter with its packages).
# Every step has a timeout (SCALING_TIMEOUT: each scaling run's, default 600 s); everything lands under $OUT (default gpu_check/), plus one line per step in
# $OUT/check.txt. Usage: OUT=gpu_check PYTHON=python3 SWEEP_TIMEOUT=480 bash benchmarks/gpu_check.sh
set -uo pipefail
OUT=${OUT:-gpu_check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
TINY=(--num-envs 4 --num-steps 16 --num-iterations 3 --update-epochs 2 --num-minibatches 2 --log-dir "$OUT/smoke")

step() {  # step NAME SECONDS COMMAND...: runs it with a timeout, logs to $OUT/NAME.log, records its exit code
  local name=$1 seconds=$2; shift 2
  timeout "$seconds" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?" | tee -a "$OUT/check.txt"
}

PACKAGES="^(jax|jaxlib|jax-cuda.*|torch|flax|equinox|optax|gymnax|craftax) "
{ nvidia-smi; "$PY" -m pip list 2>/dev/null | grep -iE "$PACKAGES"; } > "$OUT/machine.txt" 2>&1
for script in ppo_linen.py ppo_nnx.py ppo_equinox.py ppo_torch.py; do
  step "smoke_${script%.py}" 300 "$PY" "$script" --env CartPole-v1 "${TINY[@]}"
  step "smoke_${script%.py}_bf16" 300 "$PY" "$script" --env CartPole-v1 --dtype bfloat16 "${TINY[@]}"
done
step smoke_torch_cudagraphs 300 "$PY" ppo_torch.py --env CartPole-v1 --compile cudagraphs "${TINY[@]}"
step smoke_torch_cudagraphs_bf16 300 "$PY" ppo_torch.py --env CartPole-v1 --compile cudagraphs \
  --dtype bfloat16 "${TINY[@]}"
step exp1_small "${SWEEP_TIMEOUT:-480}" ./bench.sh --python "$PY" --log-dir "$OUT/runs" --experiments exp1 \
  --sizes small --envs CartPole-v1,Acrobot-v1,Breakout-MinAtar,SpaceInvaders-MinAtar --seeds 1 --iterations 20 \
  --tag gpu --timeout 120
if [[ -n "${LEANRL_DIR:-}" ]]; then
  step leanrl "${LEANRL_TIMEOUT:-900}" "$PY" -m benchmarks.leanrl --leanrl-dir "$LEANRL_DIR" --leanrl-python "$PY" \
    --rounds 1 --num-iterations 20 --work-dir "$OUT/leanrl" --out "$OUT/leanrl_gpu.json"
fi
# agents per process: the largest N last, so that what fits is measured before what may not
CLEANRL_BATCH=(--num-envs 4 --num-steps 128 --update-epochs 4 --num-minibatches 4 --num-iterations 12)
for agents in 1 16 256 1024; do
  for script in ppo_linen.py ppo_nnx.py ppo_equinox.py ppo_torch.py; do
    step "scaling_${script%.py}_${agents}" "${SCALING_TIMEOUT:-600}" "$PY" "$script" --env CartPole-v1 \
      --num-agents "$agents" "${CLEANRL_BATCH[@]}" --log-dir "$OUT/scaling"
  done
done
if [[ -n "${PUREJAXRL_DIR:-}" ]]; then
  PUREJAXRL_ARGS=(--purejaxrl-dir "$PUREJAXRL_DIR")
  [[ -n "${PUREJAXRL_PYTHON:-}" ]] && PUREJAXRL_ARGS+=(--purejaxrl-python "$PUREJAXRL_PYTHON")
  step purejaxrl "${PUREJAXRL_TIMEOUT:-1800}" "$PY" -m benchmarks.purejaxrl "${PUREJAXRL_ARGS[@]}" \
    --configs cleanrl --agents 1 16 256 1024 --rounds 1 --iterations 12 --work-dir "$OUT/purejaxrl" --out "$OUT/purejaxrl_scaling_gpu.json"
fi

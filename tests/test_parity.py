"""Parity: the Linen, NNX, Equinox and Torch scripts compute the same PPO.

One set of weights (NumPy, fixed seed) is loaded into every framework's agent; forward pass, the
rollout's log-probabilities and values, the env glue, GAE, loss, gradients and a whole update (with
the minibatch order handed in) must agree to float32 tolerance, and so must the Args defaults. Each
framework is wrapped in a small adapter with one interface, so every check is written once; SIDES
must cover the study's frameworks. Every check runs on discrete envs (a categorical policy) and on
continuous ones (a Gaussian policy, whose log std is one more shared weight); the policy's formulas
are also checked against SciPy's, so that a changed constant in any framework fails.
"""

from dataclasses import fields, replace
from functools import cache, partial

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats
import torch
from parity_sides import (
    CONTINUOUS,
    DISCRETE,
    MLPS,
    OTHERS,
    SIDES,
    SPECS,
    UPDATE_OVERRIDES,
    TorchSide,
    build_all,
    highest_matmul_precision,  # noqa: F401 (autouse: the float32 references in full float32)
    make_batch,
    make_env,
    make_weights,
    numpy_forward,
    numpy_log_prob_and_entropy,
    torch_noise,
    update_inputs,
)
from script_runs import FAST_COMPILE

import ppo_linen
import ppo_torch
from helpers import ENV_FIELDS, STUDY, numpy_gae, only_run_dir, read_json, run_script

GAINS = {"hidden": np.sqrt(2), "actor": 0.01, "critic": 1.0}
JAX_SIDES = [name for name in SIDES if name != "torch"]


def test_sides_cover_the_study():
    assert set(SIDES) == set(STUDY.frameworks), (
        "a framework of the study has no parity adapter (or one is left over)"
    )
    for name, side in SIDES.items():
        assert side.module.__file__.endswith(STUDY.frameworks[name].script)


def assert_weights_close(actual: dict, expected: dict, rtol: float, atol: float, what: str):
    assert set(actual) == set(expected), f"{what}: {sorted(actual)} != {sorted(expected)}"
    for name in MLPS:
        for i, ((w, b), (w_ref, b_ref)) in enumerate(
            zip(actual[name], expected[name], strict=True)
        ):
            np.testing.assert_allclose(
                w, w_ref, rtol=rtol, atol=atol, err_msg=f"{what}: {name} layer {i} kernel"
            )
            np.testing.assert_allclose(
                b, b_ref, rtol=rtol, atol=atol, err_msg=f"{what}: {name} layer {i} bias"
            )
    if "log_std" in expected:
        np.testing.assert_allclose(
            actual["log_std"], expected["log_std"], rtol=rtol, atol=atol, err_msg=f"{what}: log_std"
        )


# -------------------------------------------------------------------------------------- the checks
# the sizes differ in the hidden layers only: the Gaussian's head needs one
@pytest.mark.parametrize(
    "env_id, size",
    [(env_id, size) for env_id in DISCRETE for size in ppo_linen.MODEL_SIZES]
    + [(CONTINUOUS[-1], "small")],
)
def test_forward_pass_agrees(env_id, size):
    _, weights, sides = build_all(env_id, size)
    obs = np.random.default_rng(2).normal(size=(64, SPECS[env_id].obs_dim)).astype(np.float32)
    outputs = {name: side.forward(obs) for name, side in sides.items()}
    for name in OTHERS:
        for what, actual, expected in zip(
            ("actor output", "values"), outputs[name], outputs["linen"]
        ):
            np.testing.assert_allclose(
                actual, expected, rtol=1e-5, atol=1e-5, err_msg=f"{name} {what} ({size})"
            )
    for what, actual, expected in zip(
        ("actor output", "values"), outputs["linen"], numpy_forward(weights, obs)
    ):
        np.testing.assert_allclose(
            actual, expected, rtol=1e-4, atol=1e-5, err_msg=f"linen {what} vs NumPy ({size})"
        )
    assert outputs["linen"][0].shape == (64, SPECS[env_id].num_actions) and outputs["linen"][
        1
    ].shape == (64,)


def policy_inputs(env_id: str, weights: dict, size: int = 64, seed: int = 6):
    """Observations, and actions to score: random choices; or, continuous, wide samples around the
    NumPy mean, many beyond the bounds and some far in the tails."""
    rng = np.random.default_rng(seed)
    spec = SPECS[env_id]
    obs = rng.normal(size=(size, spec.obs_dim)).astype(np.float32)
    if not spec.continuous:
        return obs, rng.integers(0, spec.num_actions, size).astype(np.int32)
    mean, _ = numpy_forward(weights, obs)
    return obs, (mean + 3 * np.exp(weights["log_std"]) * rng.normal(size=mean.shape)).astype(
        np.float32
    )


@pytest.mark.parametrize("env_id", SPECS)
def test_log_probs_and_entropy_agree_with_scipy(env_id):
    """Each framework's log_prob_and_entropy (the rollout's log-probs and the loss's), on its own
    actor output, are SciPy's log-softmax and categorical entropy, or SciPy's normal log-density and
    entropy with the shared log std: a changed constant in any framework's formulas fails here, as
    well as in the cross-framework checks."""
    _, weights, sides = build_all(env_id, "small")
    obs, actions = policy_inputs(env_id, weights)
    for name, side in sides.items():
        actor_out, _ = side.forward(obs)
        log_prob, entropy = side.log_probs(actor_out, actions)
        expected_log_prob, expected_entropy = numpy_log_prob_and_entropy(
            actor_out, actions, weights.get("log_std")
        )
        assert log_prob.shape == (64,), name
        # a Gaussian's: one for all states
        assert entropy.shape == (() if SPECS[env_id].continuous else (64,)), name
        np.testing.assert_allclose(
            log_prob, expected_log_prob, rtol=1e-5, atol=1e-5, err_msg=f"{name} log_prob"
        )
        np.testing.assert_allclose(
            entropy, expected_entropy, rtol=1e-5, atol=1e-5, err_msg=f"{name} entropy"
        )


def test_gae_agrees_across_frameworks_and_numpy():
    rng = np.random.default_rng(3)
    steps, envs = 64, 8
    rewards, values, final_values = (
        rng.normal(size=(steps, envs)).astype(np.float32) for _ in range(3)
    )
    terminated = rng.random((steps, envs)) < 0.05
    truncated = (rng.random((steps, envs)) < 0.05) & ~terminated
    expected = numpy_gae(rewards, values, final_values, terminated, truncated, 0.99, 0.95)
    inputs = (rewards, values, final_values, terminated, truncated)
    for name, side in SIDES.items():
        convert = torch.as_tensor if name == "torch" else jnp.asarray
        advantages, returns = side.module.compute_gae(*map(convert, inputs), 0.99, 0.95)
        np.testing.assert_allclose(
            np.asarray(advantages), expected[0], rtol=1e-6, atol=1e-5, err_msg=name
        )
        np.testing.assert_allclose(
            np.asarray(returns), expected[1], rtol=1e-6, atol=1e-5, err_msg=name
        )


@pytest.mark.parametrize("clip_vloss", [True, False])
@pytest.mark.parametrize("env_id", SPECS)
def test_loss_and_gradients_agree(env_id, clip_vloss):
    _, weights, sides = build_all(env_id, "small", clip_vloss=clip_vloss)
    mb = make_batch(weights, 256)
    results = {name: side.loss_and_grads(mb) for name, side in sides.items()}
    loss_ref, metrics_ref, grads_ref = results["linen"]
    assert set(metrics_ref) == {
        "policy_loss",
        "value_loss",
        "entropy",
        "old_approx_kl",
        "approx_kl",
        "clipfrac",
    }
    assert 0 < metrics_ref["clipfrac"] < 1  # the batch exercises both sides of the clip
    if SPECS[env_id].continuous:
        # a gradient worth comparing
        assert np.abs(grads_ref["log_std"]).min() > 1e-3, grads_ref["log_std"]
    for name in OTHERS:
        loss, metrics, grads = results[name]
        assert loss == pytest.approx(loss_ref, rel=1e-5, abs=1e-6), name
        for key, value in metrics_ref.items():
            assert metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-6), f"{name} {key}"
        assert_weights_close(grads, grads_ref, rtol=1e-4, atol=1e-6, what=f"{name} gradients")


@pytest.mark.parametrize(
    "env_id, anneal_lr",
    [("CartPole-v1", True), ("CartPole-v1", False), ("Pendulum-v1", True), ("Reacher-misc", False)],
)
def test_one_full_update_agrees(env_id, anneal_lr):
    """All epochs x minibatches on the same batch and minibatch order: the new parameters agree, log
    std's too (its Adam step, and its share of the global norm that every gradient is clipped
    by)."""
    args, weights, sides = build_all(env_id, "small", **UPDATE_OVERRIDES, anneal_lr=anneal_lr)
    batch, permutations = update_inputs(args, weights)
    first = permutations[0, : args.batch_size // args.num_minibatches]
    grads = sides["linen"].loss_and_grads({key: value[first] for key, value in batch.items()})[2]
    norms = {
        name: np.linalg.norm(np.concatenate([np.ravel(x) for x in jax.tree.leaves(g)]))
        for name, g in grads.items()
    }
    total = np.linalg.norm(list(norms.values()))
    assert total > 2 * args.max_grad_norm, norms  # the first step is clipped already
    assert norms.get("log_std", total) > 0.1 * total, norms  # log std's share of the norm matters
    results = {name: side.update(batch, permutations) for name, side in sides.items()}
    new = {name: new_weights for name, (new_weights, _) in results.items()}
    moved = {"actor kernel 0": np.abs(new["linen"]["actor"][0][0] - weights["actor"][0][0]).max()}
    if "log_std" in weights:  # every entry of it
        moved["log_std"] = np.abs(new["linen"]["log_std"] - weights["log_std"]).min()
    assert min(moved.values()) > 1e-3, f"the update did not change the weights: {moved}"
    for name in OTHERS:
        assert_weights_close(
            new[name], new["linen"], rtol=1e-4, atol=1e-5, what=f"{name} after one update"
        )
        for key, value in results["linen"][1].items():
            assert results[name][1][key] == pytest.approx(value, rel=1e-3, abs=1e-5), (
                f"{name} {key}"
            )


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Reacher-misc"])
def test_compiled_update_agrees(env_id):
    """ppo_torch.py's --compile compile path: the whole minibatch step (forward, loss, backward,
    clipping, Adam with the tensor learning rate) compiled, from the same weights and minibatch
    order as Linen, gives the same new weights."""
    args, weights, sides = build_all(env_id, "small", **UPDATE_OVERRIDES)
    compiled = TorchSide(
        weights, ppo_torch.Args(env=env_id, model_size="small", **UPDATE_OVERRIDES), compiled=True
    )
    batch, permutations = update_inputs(args, weights)
    (expected, expected_metrics), (actual, metrics) = (
        sides["linen"].update(batch, permutations),
        compiled.update(batch, permutations),
    )
    assert_weights_close(actual, expected, rtol=1e-4, atol=1e-5, what="torch compiled update")
    for key, value in expected_metrics.items():
        assert metrics[key] == pytest.approx(value, rel=1e-3, abs=1e-5), key


# the fast path's training: 3 iterations of CartPole-v1, 2 epochs of 2 minibatches each
FAST = dict(env="CartPole-v1", num_envs=4, num_steps=16, num_iterations=3)
FAST |= dict(update_epochs=2, num_minibatches=2)


def fast_and_timed(name: str, *cuts: list) -> list:
    """A JAX script's training from the shared weights, as (each iteration's metrics, the final
    weights): first its timed path (a jitted rollout, then a jitted update, as --sync-timing runs
    them), then its fast path (--no-sync-timing: iterations(), jitted once) cut into calls of n
    iterations each, for each list of n in cuts."""
    module = SIDES[name].module
    args = module.Args(**FAST)
    weights = make_weights(SPECS[args.env], module.MODEL_SIZES[args.model_size])
    env, env_params = make_env(module, args.env)
    side = SIDES[name](weights, args)
    rollout_fn = partial(module.rollout, env, env_params, args)
    rollout, update = side.jit(rollout_fn), side.jit(side.update_fn())
    chunk = side.jit(
        partial(module.iterations, rollout_fn, side.update_fn(), args, side.lr_schedule)
    )
    results = []
    for cut in [None, *cuts]:
        # a fresh side: NNX's modules are updated in place
        training = SIDES[name](weights, args).training()
        runner = module.reset_envs(env, env_params, jax.random.key(7), args.num_envs)
        key, metrics, first = jax.random.key(8), [], 0
        for n in cut or [1] * args.num_iterations:
            if cut is None:
                runner, batch, episode_stats = rollout(training[0], runner)
                *updated, key, losses = update(*training, batch, key)
                out = jax.tree.map(lambda x: x[None], {**episode_stats, **losses})
            else:
                # arrays: eqx.filter_jit would compile again for every other Python int
                call = chunk(*training, runner, key, np.int32(first), np.int32(n))
                (*updated, runner, key), out = call
            # NNX's modules, updated in place, are not returned
            training = tuple(updated) or training
            metrics += [jax.tree.map(lambda x: np.asarray(x[k]), out) for k in range(n)]
            first += n
        results.append((metrics, side.trained_weights(training)))
    return results


# linen's in the quick check, the others slow (about 10 s each: three compiles)
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n == "linen" else pytest.mark.slow) for n in JAX_SIDES]
)
def test_the_fast_path_trains_as_the_timed_path(name):
    """--no-sync-timing's calls of iterations() train as the timed path's rollout and update calls:
    every iteration's returns and losses within float rounding, its learning rate the schedule's;
    and one program serves every n, so a run cut into other calls gets the same bits."""
    args = SIDES[name].module.Args(**FAST)
    (timed, timed_weights), (whole, weights), (cut, cut_weights) = fast_and_timed(name, [3], [2, 1])
    assert len(timed) == len(whole) == len(cut) == args.num_iterations
    steps = args.update_epochs * args.num_minibatches
    schedule = SIDES[name].module.make_optimizer(args)[1]
    for i, (expected, got, got_cut) in enumerate(zip(timed, whole, cut)):
        assert set(got) == {*expected, "learning_rate"}, name
        assert np.isfinite(expected["episodic_return"]), "an episode ends in every rollout"
        for key, value in expected.items():
            np.testing.assert_allclose(
                got[key], value, rtol=1e-5, atol=1e-6, err_msg=f"{name} iteration {i} {key}"
            )
        assert got["learning_rate"] == pytest.approx(float(schedule((i + 1) * steps - 1)))
        for key, value in got.items():
            assert np.array_equal(got_cut[key], value, equal_nan=True), f"{name} {i} {key}"
    assert_weights_close(weights, timed_weights, rtol=1e-4, atol=1e-6, what=f"{name} fast path")
    assert_weights_close(cut_weights, weights, rtol=0, atol=0, what=f"{name} cut into calls")


def test_learning_rate_schedules_agree():
    overrides = dict(num_iterations=3, update_epochs=2, num_minibatches=4)
    _, _, sides = build_all("CartPole-v1", "small", **overrides)
    steps = [0, 1, 11, 23]  # 24 optimizer steps in all
    rates = {
        name: [float(side.lr_schedule(step)) for step in steps] for name, side in sides.items()
    }
    assert rates["linen"][0] == pytest.approx(2.5e-4) and rates["linen"][-1] == pytest.approx(
        2.5e-4 / 24
    )
    for name in OTHERS:
        np.testing.assert_allclose(rates[name], rates["linen"], rtol=1e-6)


@pytest.mark.parametrize("env_id", ["Breakout-MinAtar", "Reacher-misc"])
@pytest.mark.parametrize("framework", SIDES)
def test_own_init_is_orthogonal_with_the_right_gains(framework, env_id):
    spec = SPECS[env_id]
    # continuous: for the head and log std
    hidden = ppo_linen.MODEL_SIZES["small" if spec.continuous else "medium"]
    weights = SIDES[framework].own_init(spec, hidden)
    for name in MLPS:
        layers = weights[name]
        out_dim = spec.num_actions if name == "actor" else 1
        assert [w.shape for w, _ in layers] == [
            (i, o) for i, o in zip([spec.obs_dim, *hidden], [*hidden, out_dim])
        ]
        for i, (w, b) in enumerate(layers):
            gain = GAINS["hidden"] if i < len(layers) - 1 else GAINS[name]
            # a (semi-)orthogonal matrix scaled by gain has every singular value equal to gain
            np.testing.assert_allclose(
                np.linalg.svd(w, compute_uv=False),
                gain,
                rtol=1e-3,
                err_msg=f"{framework} {name} {i}",
            )
            assert not np.any(b), f"{framework} {name} layer {i} bias is not zero"
    if spec.continuous:  # the Gaussian's log std starts at 0: a std of 1
        np.testing.assert_array_equal(
            weights["log_std"], np.zeros(spec.num_actions, np.float32), err_msg=framework
        )
    else:
        assert "log_std" not in weights, framework


@pytest.mark.slow
def test_learning_parity_on_acrobot(tmp_path):
    """Every framework learns Acrobot-v1 with the default configuration, to the same ballpark, in
    its fastest compile mode (torch's update eager: its compiled update is the eager one's,
    test_compiled_update_agrees, and test_learns_cartpole trains with it)."""
    finals = {}
    for name, fw in STUDY.frameworks.items():
        script = fw.script
        log_dir = tmp_path / script
        args = ["--env", "Acrobot-v1", "--matmul-precision", "highest"]
        proc = run_script(script, *args, "--compile", FAST_COMPILE[name], log_dir=log_dir)
        assert proc.returncode == 0, proc.stderr[-2000:]
        finals[script] = read_json(only_run_dir(log_dir) / "summary.json")["final_return"]
    print("Acrobot-v1 final returns:", finals)
    assert all(r > -200 for r in finals.values()), finals  # random play scores about -500
    assert max(finals.values()) - min(finals.values()) < 100, finals


# ------------------------------------------------------------------------- Args, rollout, env glue
def test_shared_args_have_the_same_defaults():
    defaults = {
        name: {f.name: f.default for f in fields(side.module.Args)} for name, side in SIDES.items()
    }
    shared = set.intersection(*(set(d) for d in defaults.values())) - {"exp_name", "compile"}
    assert len(shared) >= 20, shared
    for name in OTHERS:
        for field in sorted(shared):
            assert defaults[name][field] == defaults["linen"][field], (
                f"{name}: --{field} default differs"
            )


def torch_sample(actor_out, log_std, noise):
    """What ppo_torch.py's policy must sample from uniform noise: Gumbel-max; or the Gaussian by
    SciPy's inverse CDF."""
    noise = np.asarray(noise, np.float64)
    if log_std is None:
        return np.argmax(actor_out - np.log(-np.log(noise)), -1)
    return actor_out + np.exp(log_std) * scipy.special.ndtri(noise)


@pytest.mark.parametrize("env_id", SPECS)
def test_rollout_log_probs_and_values_agree(env_id):
    """The rollout's policy step: given the same weights, observations and actions, the same
    log-probs and values; with its own sampled actions, each framework's log-probs and values are
    SciPy's at its forward pass. The JAX frameworks sample the same actions for the same key; torch
    samples its formula of the uniform noise."""
    _, weights, sides = build_all(env_id, "small")
    obs, actions = policy_inputs(env_id, weights)
    log_std = weights.get("log_std")
    given = {name: side.policy(obs, actions) for name, side in sides.items()}
    for name in OTHERS:
        np.testing.assert_array_equal(given[name][0], actions)
        np.testing.assert_allclose(
            given[name][1], given["linen"][1], rtol=1e-5, atol=1e-5, err_msg=f"{name} log-probs"
        )
        np.testing.assert_allclose(
            given[name][2], given["linen"][2], rtol=1e-5, atol=1e-6, err_msg=f"{name} values"
        )
    sampled = {}
    for name, side in sides.items():
        sampled[name], logprob, value = side.policy(obs)
        actor_out, values = side.forward(obs)
        if SPECS[env_id].continuous:
            assert sampled[name].dtype == np.float32 and sampled[name].shape == actor_out.shape, (
                name
            )
        else:
            assert sampled[name].dtype == np.int32 and set(np.unique(sampled[name])) <= set(
                range(actor_out.shape[1])
            )
        expected, _ = numpy_log_prob_and_entropy(actor_out, sampled[name], log_std)
        np.testing.assert_allclose(logprob, expected, rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(value, values, rtol=1e-5, atol=1e-6, err_msg=name)
    for name in JAX_SIDES:
        np.testing.assert_allclose(
            sampled[name], sampled["linen"], rtol=1e-5, atol=1e-5, err_msg=f"{name} samples"
        )
    noise = torch_noise(len(obs), SPECS[env_id].num_actions).numpy()
    expected = torch_sample(sides["torch"].forward(obs)[0], log_std, noise)
    np.testing.assert_allclose(
        sampled["torch"], expected, rtol=1e-5, atol=1e-5, err_msg="torch samples"
    )


@pytest.mark.parametrize("env_id", ["Reacher-misc"])  # 2-D, and gymnax would not clip them itself
def test_rollout_keeps_the_unclipped_sample(env_id):
    """Each script's own rollout, with a log std that puts most samples beyond the bounds: the Batch
    keeps the samples themselves, with their log-probs at the rollout's observations (the env gets
    them clipped: test_env_glue_agrees)."""
    spec = SPECS[env_id]
    weights = make_weights(spec, ppo_linen.MODEL_SIZES["small"])
    high = np.asarray(gymnax.make(env_id)[0].action_space().high)
    weights["log_std"] = np.log(5 * np.broadcast_to(high, spec.num_actions)).astype(np.float32)
    args, _, sides = build_all(env_id, "small", weights, num_envs=4, num_steps=8)
    batches = {name: side.rollout() for name, side in sides.items()}
    for name, batch in batches.items():
        assert batch["actions"].shape == (args.batch_size, spec.num_actions), name
        assert np.mean(np.abs(batch["actions"]) > high) > 0.5, f"{name}: the samples were clipped"
        mean, values = numpy_forward(weights, batch["obs"])
        expected, _ = numpy_log_prob_and_entropy(mean, batch["actions"], weights["log_std"])
        np.testing.assert_allclose(
            batch["logprobs"], expected, rtol=1e-5, atol=1e-4, err_msg=f"{name} log-probs"
        )
        np.testing.assert_allclose(
            batch["values"], values, rtol=1e-4, atol=1e-5, err_msg=f"{name} values"
        )
    for name in JAX_SIDES:  # the same key, the same samples, the same envs
        for key in ("obs", "actions"):
            np.testing.assert_allclose(
                batches[name][key], batches["linen"][key], rtol=1e-5, atol=1e-5, err_msg=name
            )


def test_torch_rollout_runs_every_layer_agent_major(monkeypatch):
    """ppo_torch's rollout gives its layers (agents, batch, features) only: a steps-first input
    (num_steps, agents, envs, features) broadcasts against the agents' weights, and torch's matmul
    copies each agent's weights once a step (GiBs a rollout for the medium model)."""
    _, _, sides = build_all("Pendulum-v1", "small", num_envs=4, num_steps=8)
    dims = []
    forward = ppo_torch.Linear.forward

    def recording_forward(layer, x):
        dims.append(x.dim())
        return forward(layer, x)

    monkeypatch.setattr(ppo_torch.Linear, "forward", recording_forward)
    sides["torch"].rollout()
    # per layer: the policy's steps and the final values
    assert len(dims) > 8 * 3
    assert set(dims) == {3}


def env_glue_run(name: str, env_id: str, actions: np.ndarray) -> tuple[list[dict], list]:
    """reset_envs, then step_envs once per row of actions (jitted, as in the scripts): every field
    as NumPy, and the Runner before each step. ppo_torch.py hands actions and observations across
    with DLPack, so its side does too."""
    module = SIDES[name].module
    env, env_params = make_env(module, env_id)
    to_jax = (lambda a: jnp.from_dlpack(torch.as_tensor(a))) if name == "torch" else jnp.asarray
    to_numpy = (lambda x: torch.from_dlpack(x).numpy()) if name == "torch" else np.asarray
    step = jax.jit(partial(module.step_envs, env, env_params))
    runner = module.reset_envs(env, env_params, jax.random.key(7), actions.shape[1])
    out, runners = [{"obs": to_numpy(runner.obs)}], []
    for action in actions:
        runners.append(runner)
        runner, env_fields = step(runner, to_jax(action))
        fields = {name: to_numpy(value) for name, value in zip(ENV_FIELDS, env_fields, strict=True)}
        out.append({"obs": to_numpy(runner.obs), **fields})
    return out, runners


def glue_actions(env_id: str, num_envs: int = 6) -> np.ndarray:
    """Random actions: 40 steps of choices, episodes ending both ways; or 16 continuous ones (one
    truncation: these envs only end by the time limit), up to 5 times the bounds, most of them
    beyond."""
    rng = np.random.default_rng(8)
    spec = SPECS[env_id]
    if not spec.continuous:
        return rng.integers(0, spec.num_actions, (40, num_envs)).astype(np.int32)
    space = gymnax.make(env_id)[0].action_space()
    return (rng.uniform(-5, 5, (16, num_envs, spec.num_actions)) * space.high).astype(np.float32)


def direct_steps(env_id: str, runners: list, actions) -> list[tuple[np.ndarray, np.ndarray]]:
    """(reward, next observation before any reset) of gymnax's own step_env from each Runner's
    states, no glue."""
    step, env_params = direct_step(env_id)
    out = []
    for runner, action in zip(runners, actions, strict=True):
        keys = jax.random.split(jax.random.key(0), len(action))  # unused by these envs' step_env
        obs, _, reward, _, _ = step(keys, runner.env_state, jnp.asarray(action), env_params)
        out.append((np.asarray(reward), np.asarray(obs).reshape(len(action), -1)))
    return out


@cache
def direct_step(env_id: str):
    """gymnax's step_env over a batch, jitted once per env, and the env params of make_env."""
    env, env_params = gymnax.make(env_id)
    return jax.jit(jax.vmap(env.step_env, in_axes=(0, 0, 0, None))), env_params.replace(
        max_steps_in_episode=12
    )


@pytest.mark.parametrize("env_id", SPECS)
def test_env_glue_agrees(env_id):
    """step_envs and reset_envs give the same transitions in every framework. On continuous envs,
    with actions far beyond the bounds: in every framework the env got them clipped (rewards and
    next observations are gymnax's own for the clipped actions); see
    test_rollout_keeps_the_unclipped_sample for what the Batch keeps."""
    actions = glue_actions(env_id)
    runs = {name: env_glue_run(name, env_id, actions) for name in SIDES}
    expected = runs["linen"][0]
    if not SPECS[env_id].continuous:
        assert any(t["terminated"].any() for t in expected[1:])
    assert any(t["truncated"].any() for t in expected[1:])
    assert set(expected[1]) == {"obs", *ENV_FIELDS}
    for name in OTHERS:
        for step, (actual, reference) in enumerate(zip(runs[name][0], expected, strict=True)):
            assert set(actual) == set(reference)
            for key in reference:
                np.testing.assert_array_equal(
                    actual[key], reference[key], err_msg=f"{name} step {step} {key}"
                )
    if not SPECS[env_id].continuous:
        return
    space = gymnax.make(env_id)[0].action_space()
    clipped = np.clip(actions, space.low, space.high)
    assert np.mean(clipped != actions) > 0.5
    for name, (transitions, runners) in runs.items():
        for step, (reward, next_obs) in enumerate(direct_steps(env_id, runners, clipped)):
            got = transitions[step + 1]
            np.testing.assert_allclose(
                got["reward"], reward, rtol=1e-6, atol=1e-6, err_msg=f"{name} step {step}"
            )
            np.testing.assert_allclose(
                got["final_obs"], next_obs, rtol=1e-6, atol=1e-6, err_msg=f"{name} step {step}"
            )
    # gymnax would not clip them itself: unclipped actions give other rewards
    if env_id == "Reacher-misc":
        unclipped = direct_steps(env_id, runs["linen"][1], actions)
        assert not np.allclose([r for r, _ in unclipped], [t["reward"] for t in expected[1:]])


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_torch_traced_policy_follows_the_weights(env_id):
    """--compile torchscript (and compile on a CPU) traces the policy step: it gives the eager
    policy's actions, log-probs and values, also after every weight changed (a frozen trace keeps
    the weights it was traced with)."""
    _, weights, sides = build_all(env_id, "small")
    agent = sides["torch"].agent
    obs, _ = policy_inputs(env_id, weights)
    # the agents' axis (of one), as the rollout calls the policy step
    obs, noise = torch.as_tensor(obs)[None], torch_noise(len(obs), SPECS[env_id].num_actions)[None]
    torch_side = sides["torch"]
    args = replace(torch_side.args, compile="torchscript")
    # traced at another batch size
    traced = torch_side.train_state(args, torch.Generator(), obs[:, :4]).policy
    generator = torch.Generator().manual_seed(3)
    for _ in range(2):
        with torch.no_grad():
            expected, actual = agent.get_action_and_value(obs, noise), traced(obs, noise)
            # in place, as the optimizer does: every weight and bias changes
            for param in agent.parameters():
                param.add_(0.1 * torch.randn(param.shape, generator=generator))
        np.testing.assert_array_equal(actual[0].numpy(), expected[0].numpy())
        for a, e in zip(actual[1:], expected[1:]):
            np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("env_id", ["Breakout-MinAtar", "Reacher-misc"])
def test_torch_rollout_with_the_traced_policy_agrees(env_id):
    """ppo_torch.rollout with the traced policy step gives the eager rollout's Batch: the same
    weights and noise."""
    _, _, sides = build_all(env_id, "small", num_envs=4, num_steps=8)
    torch_side = sides["torch"]
    env, env_params = make_env(ppo_torch, env_id)
    runner = ppo_torch.reset_envs(env, env_params, jax.random.key(7), 4)
    eager, traced = (
        torch_side.run_rollout(env, env_params, runner, traced=t) for t in (False, True)
    )
    for key, value in eager._asdict().items():
        np.testing.assert_allclose(
            getattr(traced, key).numpy(), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=key
        )


def test_explained_variance_is_nan_for_constant_returns():
    """No crash and no inf when the returns have zero variance: explained variance is NaN in every
    framework."""
    overrides = dict(num_envs=4, num_steps=8, update_epochs=1, num_minibatches=2, num_iterations=1)
    args, weights, sides = build_all("CartPole-v1", "small", **overrides)
    batch = make_batch(weights, args.batch_size)
    batch["returns"] = np.full(args.batch_size, 1.5, np.float32)
    permutations = np.arange(args.batch_size, dtype=np.int32)[None]
    for name, side in sides.items():
        _, metrics = side.update(batch, permutations)
        assert np.isnan(metrics["explained_variance"]), name
        assert all(np.isfinite(v) for k, v in metrics.items() if k != "explained_variance"), (
            name,
            metrics,
        )

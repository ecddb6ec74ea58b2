"""Evaluate a policy kept by a ppo_*.py script's --save-model, in any of the four frameworks (part
of benchback-rl).

    python evaluate.py RUN_DIR_OR_CHECKPOINT [--framework linen|nnx|equinox|torch] [--episodes 10]
        [--seed 1] [--stochastic] [--video PATH] [--export-onnx PATH] [--hub-folder DIR]

The checkpoint (model.safetensors, read and validated by evaluation/model_file.py) is loaded into
the chosen framework's own network (its template's from_shared; default: the framework that
trained it). The env is made as the template makes it (its make_env, the checkpoint's env id and
backend), one env per episode; each runs its first episode to its end (termination or truncation).
The observations are normalised with the checkpoint's statistics (env_normalize.scale, as in
training, frozen), the policy acts deterministically (argmax of the logits, or the Gaussian's mean)
or, with --stochastic, samples (seeded by --seed), and the env gets the action clipped to its bounds
as in training. It prints the mean ± std (population std) of the episode returns and records them
in eval.json beside the checkpoint (evaluation/eval_file.py): each entry names its checkpoint (file
name and sha256), framework, mode, episodes and seed; an evaluation replaces only its own, nothing
else is dropped. Each file written is announced by a "wrote PATH" line (evaluation/progress.py);
the episodes ended, and a video's frames, by a progress line every few seconds.

SIGINT, SIGTERM and SIGHUP (atomic.py) stop it at its next step or frame, a second one at once:
one line, exit code 130, no file left half-written (eval.json, written before the video, stays).

Bad input (a missing or bad checkpoint, its env id not one the project knows, a framework not in the
list, an eval.json this tool did not write or cannot add to, an output the options cannot write, a
symbolic link among the files it would write, a checkpoint's folder that another run or evaluation
writes in, atomic.hold_folder): one line, exit code 2, before anything is evaluated or written.
The checkpoint's env id is checked against fixed lists (model_file.unknown_env) before any library
sees it; no file is written through a link the tool did not make (atomic.write_file). With
--hub-folder, an evaluation whose mean or std return is not finite (the card would publish nan) is
one line, exit code 1, and nothing is written.

Interfaces of the modules behind three options, imported only when the option is given:

    evaluation.video.check(path: str, meta: dict) -> None
        evaluation.video.CannotRecord (a ValueError, one line) for a --video path it cannot write
        (its suffix, a folder, a file it did not write...) or an env it cannot draw here (no
        renderer, or MuJoCo's cannot start): called before anything runs; meta: the checkpoint's
        metadata
    evaluation.video.record(replay: Replay, path: str) -> evaluation.video.Recording
        episode 0 of the evaluation as a video at path (GIF, or MP4); a renderer that fails midway
        raises CannotRecord: evaluate.py prints it, the evaluation stays written
    evaluation.share.check_onnx(path: str) -> None
    evaluation.hub.check_hub_folder(folder: str) -> None
        ValueError (one line) for an output they cannot write: called before anything runs
    evaluation.hub.check_result(result: dict) -> None
        ValueError (one line) for an evaluation the card cannot publish (a return not finite)
    evaluation.share.export_onnx(ckpt: model_file.Checkpoint, path: str, bounds) -> None
        the actor as ONNX, through ppo_torch's network, whatever framework trained it; bounds: the
        env's action bounds (low, high), to which a continuous action is clipped
    evaluation.hub.write_hub_folder(folder: str, ckpt_path: Path, ckpt: model_file.Checkpoint,
                                    result: dict, replay: Replay) -> None
        the folder for `huggingface-cli upload`; result: this evaluation's entry of eval.json

A Replay (below) is episode 0 of the evaluation: its env 0's states, and the policy that acted.
"""

import atomic

if __name__ == "__main__":
    # a signal during the imports: held, then taken by main()'s policy (no traceback)
    atomic.hold_stop_signals()

import importlib
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Callable, Literal, NamedTuple, Optional

import numpy as np
import tyro

import checkpoint
from core import option_checks
from core.command_line import parse_args
from evaluation import eval_file, model_file, policy, progress

TOOL = eval_file.TOOL
EVAL_FILE = eval_file.NAME
FRAMEWORKS = ("linen", "nnx", "equinox", "torch")
# one env per episode, all in one batch
MAX_EPISODES = 10_000


@dataclass(frozen=True)
class Args:
    """Evaluates a policy saved by a ppo_*.py script's --save-model, in any of the four
    frameworks"""

    checkpoint: Annotated[str, tyro.conf.Positional]
    """a run folder (its model.safetensors) or a checkpoint file"""
    # "trained", not None: tyro would list None among the choices of a bad --framework
    framework: Literal["trained", "linen", "nnx", "equinox", "torch"] = "trained"
    """the framework whose network runs the policy (trained: the one that trained it)"""
    episodes: int = 10
    """the number of episodes, each run to its end (termination or truncation)"""
    seed: int = 1
    """the seed of the envs (and of the sampling, with --stochastic)"""
    stochastic: bool = False
    """sample the actions from the policy (default: argmax of the logits, or the Gaussian's mean)"""
    video: Optional[str] = None
    """record episode 0 as a video at this path (.gif, or .mp4)"""
    export_onnx: Optional[str] = None
    """write the actor as ONNX at this path (through PyTorch, whatever framework trained it)"""
    hub_folder: Optional[str] = None
    """write a folder ready for `huggingface-cli upload` (model, model card, eval.json, video)"""

    def __post_init__(self):
        option_checks.check_int("--episodes", self.episodes, 1, MAX_EPISODES)
        # the range that JAX keys, NumPy generators and envpool all take
        option_checks.check_int("--seed", self.seed, 0, 2**31 - 1)


class Replay(NamedTuple):
    """Episode 0 of an evaluation, for a video: what a renderer needs, whatever the env."""

    env_id: str
    backend: str
    env: object  # the template's batched env (make_env), not normalised
    env_params: object
    # env 0's state before each step of its first episode, batch axis dropped, as NumPy arrays
    # (gymnax, Craftax, Brax; envpool's are step counts: its states live in the pool)
    states: list
    # env 0's actions, as the env got them
    actions: list
    # a batch of raw observations -> the actions the env gets (normalised, the policy, clipped): the
    # policy to replay in another simulator of the same model (gymnasium's MuJoCo for envpool's)
    policy: Callable[[np.ndarray], np.ndarray]
    seed: int


# ------------------------------------------------------------------------------------- the episodes
def first_env(tree):
    """env 0's part of a batched pytree, as NumPy arrays; a typed JAX key (in Craftax's state) stays
    a JAX array: NumPy has no key type."""
    import jax

    def first(x):
        return x[0] if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else np.asarray(x[0])

    return jax.tree.map(first, tree)


def run_episodes(module, env, env_params, runner, policy, keep: bool = False):
    """Each env of the reset runner run to the end of its first episode, with the template's own
    step (the env's time limit ends every episode): (returns, lengths, env 0's states and actions,
    when keep)."""
    import jax

    episodes = len(runner.obs)
    step = jax.jit(partial(module.step_envs, env, env_params))
    returns = np.zeros(episodes, np.float64)
    lengths = np.zeros(episodes, np.int64)
    ended = np.zeros(episodes, bool)
    states, actions = [], []
    counter = progress.Progress("evaluation", episodes, "episodes ended")
    while not ended.all():
        atomic.check_stop()  # a stop signal stops the evaluation here
        action = policy(np.asarray(runner.obs))
        if keep and not ended[0]:
            states.append(first_env(runner.env_state))
            actions.append(action[0])
        runner, (_, terminated, truncated, _, ended_return, ended_length) = step(runner, action)
        first_end = np.asarray(terminated | truncated) & ~ended
        returns[first_end] = np.asarray(ended_return)[first_end]
        lengths[first_end] = np.asarray(ended_length)[first_end]
        ended |= first_end
        counter.step(int(first_end.sum()))
    return returns, lengths, states, actions


def check_env(env, obs_dim: int, ckpt) -> None:
    """ValueError (one line) when the env made from the metadata is not the one the network was
    trained on (another version of the env's package, say)."""
    meta = ckpt.meta
    kind = "continuous" if env.continuous else "discrete"
    if kind != meta["action_kind"] or env.num_actions != meta["num_actions"]:
        raise ValueError(
            f"{meta['env']} here has {kind} actions of size {env.num_actions}, the checkpoint's "
            f"policy {meta['action_kind']} ones of size {meta['num_actions']}"
        )
    if [obs_dim] != meta["obs_shape"]:
        raise ValueError(
            f"{meta['env']} here gives observations of length {obs_dim}, the checkpoint's network "
            f"takes {meta['obs_shape']}"
        )


class Setup(NamedTuple):
    """What an evaluation runs: the template, its env, and the policy in its network."""

    ckpt: model_file.Checkpoint
    framework: str
    module: object  # the template, ppo_{framework}
    env: object
    env_params: object
    runner: object  # the template's Runner of the envs just reset, one per episode
    policy: Callable[[np.ndarray], np.ndarray]
    stochastic: bool


class Evaluation(NamedTuple):
    result: dict  # this evaluation's entry of eval.json
    replay: Optional[Replay]  # episode 0, when kept


def prepare(ckpt, framework: str, episodes: int, seed: int, stochastic: bool) -> Setup:
    """The envs (reset) and the policy of ckpt (model_file.load's) in framework's network, to run
    once; ValueError (one line) for an env that cannot be made here, or that is not the
    network's."""
    import jax

    meta = ckpt.meta
    module = importlib.import_module(f"ppo_{framework}")
    env, env_params = module.make_env(meta["env"], meta["env_backend"], episodes, seed)
    runner = module.reset_envs(env, env_params, jax.random.key(seed), episodes)
    check_env(env, runner.obs.shape[-1], ckpt)
    rng = np.random.default_rng(seed) if stochastic else None
    act = policy.make_policy(policy.load_actor(ckpt, framework), ckpt, env.action_bounds, rng)
    return Setup(ckpt, framework, module, env, env_params, runner, act, stochastic)


def evaluate(setup: Setup, seed: int, keep: bool = False) -> Evaluation:
    """The setup's policy over its envs' first episodes (env 0's states and actions kept, when
    keep); seed: the one the setup was prepared with, for the record."""
    meta, env, env_params, policy = setup.ckpt.meta, setup.env, setup.env_params, setup.policy
    returns, lengths, states, actions = run_episodes(
        setup.module, env, env_params, setup.runner, policy, keep
    )
    result = {
        "framework": setup.framework,
        "trained_by": meta["framework"],
        "env": meta["env"],
        "env_backend": meta["env_backend"],
        "mode": "stochastic" if setup.stochastic else "deterministic",
        "episodes": len(returns),
        "seed": seed,
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "returns": returns.tolist(),
        "lengths": lengths.tolist(),
        "iteration": meta["iteration"],
        "checkpoint": eval_file.checkpoint_entry(setup.ckpt),
    }
    replay = None
    if keep:
        replay = Replay(
            meta["env"], meta["env_backend"], env, env_params, states, actions, policy, seed
        )
    return Evaluation(result, replay)


# ---------------------------------------------------------------------------------------- eval.json
def merged_record(path: Path, result: dict) -> dict:
    """eval.json's record with result in it (eval_file.merged): it replaces only the entry of the
    same checkpoint, framework, mode, episodes and seed; the others stay."""
    return eval_file.merged(path, result)


def check_eval_file(path: Path) -> None:
    """ValueError (one line) unless eval.json is absent or this tool's, with a list of evaluations,
    and not a link (eval_file.check)."""
    eval_file.check(path)


def summary(result: dict) -> str:
    env, trained, framework = result["env"], result["trained_by"], result["framework"]
    mean, std, n = result["mean_return"], result["std_return"], result["episodes"]
    return (
        f"{env} ({trained}'s policy) in {framework}: return {mean:.2f} ± {std:.2f} over {n} "
        f"episodes, {result['mode']}, seed {result['seed']}"
    )


# ------------------------------------------------------------------------------------------- main
def check_options(args: Args, meta: dict) -> None:
    """The outputs of --video, --export-onnx and --hub-folder checked before anything runs."""
    if args.video is not None:
        from evaluation import video

        video.check(args.video, meta)
    if args.export_onnx is not None:
        from evaluation import share

        share.check_onnx(args.export_onnx)
    if args.hub_folder is not None:
        from evaluation import hub

        hub.check_hub_folder(args.hub_folder)


def write_extras(args: Args, ckpt_path: Path, setup: Setup, evaluation: Evaluation) -> None:
    """The video, the ONNX file and the Hub folder, each only when its option is given; a stop
    signal stops them before each (and at each frame of the video)."""
    ckpt = setup.ckpt
    if args.video is not None:
        from evaluation import video

        atomic.check_stop()
        try:
            made = video.record(evaluation.replay, args.video)
            size, seconds = f"{made.width} x {made.height}", f"{made.seconds:.1f} s"
            drawn = f"drawn by {made.renderer} in {seconds}"
            progress.wrote(made.path, f"{made.frames} frames, {size}, {drawn}")
        except video.CannotRecord as e:
            print(f"{TOOL}: no video: {e}", file=sys.stderr)
    if args.export_onnx is not None:
        from evaluation import share

        atomic.check_stop()
        share.export_onnx(ckpt, args.export_onnx, setup.env.action_bounds)
        progress.wrote(args.export_onnx, "the actor as ONNX")
    if args.hub_folder is not None:
        from evaluation import hub

        atomic.check_stop()
        hub.write_hub_folder(args.hub_folder, ckpt_path, ckpt, evaluation.result, evaluation.replay)


def main(argv: Optional[list[str]] = None) -> dict:
    """evaluate.py's command line: this evaluation's entry of eval.json. Bad input: one line on
    stderr, exit code 2, nothing written. A stop signal: one line, exit code 130."""
    stop = atomic.Interrupts("the next step")
    # the handlers put back after a call of main(argv) (a test's), not after the command line's
    for_good = argv is None
    return stop.run(lambda: evaluate_command(argv), TOOL, "no file is left half-written", for_good)


def evaluate_command(argv: Optional[list[str]]) -> dict:
    """main(), under the signal policy."""
    try:
        args = parse_args(Args, sys.argv[1:] if argv is None else argv)
        ckpt = model_file.load(args.checkpoint)
        ckpt_path = Path(checkpoint.checkpoint_file(args.checkpoint))
        framework = ckpt.meta["framework"] if args.framework == "trained" else args.framework
        eval_path = ckpt_path.parent / EVAL_FILE
        check_eval_file(eval_path)
        check_options(args, ckpt.meta)
        setup = prepare(ckpt, framework, args.episodes, args.seed, args.stochastic)
        # one writer at a time in the checkpoint's folder: not while a run or another
        # evaluation writes there
        held = atomic.hold_folder(eval_path.parent, f"{TOOL}:")
    except (ValueError, OSError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    try:
        keep = args.video is not None or args.hub_folder is not None
        evaluation = evaluate(setup, args.seed, keep)
        if args.hub_folder is not None:
            from evaluation import hub

            try:
                hub.check_result(evaluation.result)
            except ValueError as e:  # a nan return: nothing is written, not even eval.json
                print(f"error: {e}", file=sys.stderr)
                sys.exit(1)
        atomic.write_json(
            eval_path, merged_record(eval_path, evaluation.result), given=eval_path.parent
        )
        print(summary(evaluation.result), flush=True)
        progress.wrote(eval_path, "this evaluation's entry among the checkpoint's evaluations")
        write_extras(args, ckpt_path, setup, evaluation)
        atomic.check_stop()  # a signal during the last of them: still a stop
    finally:
        if held:
            atomic.release_folder(eval_path.parent)
    return evaluation.result


if __name__ == "__main__":
    main()

"""The options of a sweep (bench.sh's matrix options), checked against the study: what a sweep
selects.

Each check raises option_checks.BadOption, whose message names the bad value and the valid choices.
"""

import argparse
from dataclasses import dataclass
from typing import Optional

from core import run_args, study
from core.option_checks import (
    MAX_COUNT,
    MAX_RUNS,
    BadOption,
    bounded_int,
    choices,
    cpus,
    positive_int,
    shard,
)


def why_untrainable(env: str) -> Optional[str]:
    """Why the PPO scripts cannot train `env`, an env label (an id on gymnax, "{id}@envpool" on
    envpool), in words; None when they can. On gymnax, env_adapters.py's check, the same as the
    scripts' make_env (gymnax is imported only for an env outside the study, which takes a few
    seconds); on envpool, an id of env_adapters.ENVPOOL_ENVS."""
    env_id, backend = study.split_label(env)
    if backend not in study.BACKENDS:
        return f"names backend {backend!r}; backends: {', '.join(study.BACKENDS)}"
    if study.env_label(env_id, backend) != env:  # "X@gymnax": a gymnax env is named by its id alone
        return f"is a {backend} env, named {env_id!r} alone"
    import env_adapters

    if backend == "envpool":
        return None if env_id in env_adapters.ENVPOOL_ENVS else "is not an envpool env here"
    if env_id in env_adapters.adapted_envs():
        return None
    problem = env_adapters.gymnax_problem(env_id)
    if problem and env_id in env_adapters.ENVPOOL_ENVS:
        problem += f" to gymnax (on envpool: {study.env_label(env_id, 'envpool')})"
    return problem


def env_choices(value: str, the_study: study.Study) -> tuple[str, ...]:
    """--envs: each a study env label or another env the scripts can train (a gymnax id, or
    "{id}@envpool" for an envpool id); BadOption names the first other one and lists what can be
    trained (on this error path only: it makes every gymnax env, about a second)."""
    envs = choices("--envs", value, the_study.every_env, extra=lambda env: True)
    # the study's own are trainable
    for env in (env for env in envs if env not in the_study.every_env):
        problem = why_untrainable(env)
        if problem:
            from env_adapters import ENVPOOL_ENVS, usable_envs

            outside = [other for other in usable_envs() if other not in the_study.every_env]
            raise BadOption(
                f"--envs: {env!r} {problem}, so the scripts cannot train it; valid choices: the "
                f"study's {', '.join(the_study.every_env)}, an envpool env as ID@envpool (ID one "
                f"of {', '.join(ENVPOOL_ENVS)}), or another gymnax env the scripts can train "
                f"(Discrete or 1-D Box actions): {', '.join(outside)}"
            )
    return envs


# The run arguments the sweep sets itself (the scripts' flags, as tyro spells them; tyro takes _ for
# - too): given again after --, the last value would win, and the run would not be the run its
# label, its folder and the resume say. --num-iterations and --tag only when --iterations and --tag
# set them.
SWEEP_FLAGS = {
    "--env": "bench.sh --envs",
    "--model-size": "bench.sh --sizes",
    "--compile": "each experiment's compile modes",
    "--seed": "bench.sh --seeds",
    "--log-dir": "bench.sh --log-dir",
    "--exp-name": "each experiment's name",
    "--sync-timing": "each experiment's sync setting",
    "--no-sync-timing": "each experiment's sync setting",
    "--env-backend": "each experiment's backends, or bench.sh --envs ID@envpool",
}
SWEEP_FLAGS |= {axis.flag: f"each experiment's {axis.field}" for axis in study.RUN_AXES}


def check_extra(
    extra: tuple[str, ...],
    iterations: Optional[int],
    tag: Optional[str],
    env_threads: Optional[int] = None,
    save_every: int = 0,
) -> None:
    """BadOption for an argument after -- that sets what the sweep sets (in any spelling: --seed 7,
    --seed=7, --log_dir X)."""
    owned = dict(SWEEP_FLAGS)
    if iterations is not None:
        owned["--num-iterations"] = "bench.sh --iterations"
    if tag is not None:
        owned["--tag"] = "bench.sh --tag"
    if env_threads is not None:
        owned["--env-threads"] = "bench.sh --cpus"
    if save_every:
        owned["--save-every"] = "bench.sh --save-every"
    for arg in extra:
        flag = arg.split("=", 1)[0].replace("_", "-")
        if flag in owned:
            raise BadOption(
                f"{arg!r} after -- would override what the sweep sets itself ({owned[flag]}); "
                f"leave {', '.join(owned)} out of the arguments after --"
            )


def check_learning(
    experiments: tuple[str, ...], iterations: Optional[int], extra: tuple[str, ...], the_study
) -> None:
    """BadOption for --iterations, or a run argument (after --, or a preset's) that changes what a
    run learns, given to a learning experiment: its runs are its configuration's (study.toml), or
    the analysis does not count them."""
    learning = [name for name in experiments if the_study.experiments[name].configs]
    if not learning:
        return
    where = (
        f"{learning[0]} is a learning experiment, whose runs take its configurations' flags "
        "(study.toml)"
    )
    if iterations is not None:
        raise BadOption(f"--iterations {iterations}: {where}; leave --iterations out")
    try:
        given = run_args.flags(["", *extra])
    except ValueError:  # not flags: the scripts' parser says so before the first run
        return
    configured = {
        run_args.key(arg)
        for name in learning
        for config in the_study.experiments[name].configs
        for arg in config.args
        if arg.startswith("--")
    }
    changed = [name for name in given if name in run_args.HYPERPARAMETERS | configured]
    if changed:
        flag = f"--{changed[0].replace('_', '-')}"
        raise BadOption(
            f"{flag} after --: {where}, and {flag} changes what it learns; leave it out (after -- "
            "a learning experiment takes only flags that do not, such as --track or "
            "--env-threads)"
        )


@dataclass(frozen=True)
class Selection:
    experiments: tuple[str, ...]
    frameworks: tuple[str, ...]
    envs: Optional[tuple[str, ...]]  # None: each experiment's own
    sizes: tuple[str, ...]
    seeds: int
    iterations: Optional[int]
    tag: Optional[str]
    log_dir: str
    shard: tuple[int, int]
    python: str
    extra: tuple[str, ...]
    # --env-threads of the envpool runs (bench.sh --cpus); None: the scripts' own
    env_threads: Optional[int] = None
    # None: each experiment's own; DEFAULT_MODE: each framework's first
    compile_modes: Optional[tuple[str, ...]] = None
    # --save-every of the gymnax runs (bench.sh --save-every); 0: none
    save_every: int = 0


# --compile-modes: the word for each framework's default mode (its first in study.toml), beside the
# modes' names
DEFAULT_MODE = "default"
# --seeds when not given: seeds 1..3
DEFAULT_SEEDS = "3"


def mode_choices(value: Optional[str], the_study: study.Study) -> Optional[tuple[str, ...]]:
    """The items of --compile-modes, each "default" or a compile mode of some framework of the
    study."""
    if value is None:
        return None
    modes = (mode for fw in the_study.frameworks.values() for mode in fw.compile)
    return choices("--compile-modes", value, (DEFAULT_MODE, *dict.fromkeys(modes)))


def select(args: argparse.Namespace, the_study: study.Study) -> Selection:
    """Checks the options against the study; BadOption names the first bad value."""
    sel = Selection(
        experiments=choices("--experiments", args.experiments, tuple(the_study.experiments)),
        frameworks=choices("--frameworks", args.frameworks, tuple(the_study.frameworks)),
        envs=None if args.envs is None else env_choices(args.envs, the_study),
        sizes=choices("--sizes", args.sizes, the_study.sizes),
        seeds=positive_int(
            "--seeds", DEFAULT_SEEDS if args.seeds is None else args.seeds, MAX_RUNS
        ),
        iterations=positive_int("--iterations", args.iterations),
        tag=args.tag,
        log_dir=args.log_dir,
        shard=shard(args.shard),
        python=args.python,
        extra=tuple(args.extra),
        env_threads=cpus(args.env_threads),
        compile_modes=mode_choices(args.compile_modes, the_study),
        save_every=bounded_int("--save-every", args.save_every or "0", 0, MAX_COUNT),
    )
    check_extra(sel.extra, sel.iterations, sel.tag, sel.env_threads, sel.save_every)
    check_learning(sel.experiments, sel.iterations, sel.extra, the_study)
    return sel

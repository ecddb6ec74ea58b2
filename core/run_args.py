"""The flags of a run's command, read as the scripts' parser (tyro) reads them: one reading for
core/runlog.py (a run's config.json must agree with its own command), the learning analysis (a
run counts only with its configuration's hyperparameters) and bench.sh's option checks (a learning
experiment takes no run argument that changes them).

    flags(["ppo_linen.py", "--env", "CartPole-v1", "--num_envs=4", "--no-sync-timing"])
    -> {"env": "CartPole-v1", "num_envs": "4", "sync_timing": False}
"""

from typing import Union

# The flags that change what a run learns: PPO's hyperparameters (the scripts' other flags place a
# run, time it or log it: env, seed, model size, compile mode, data type, device, folders, tag, W&B,
# ...). A learning experiment's runs may differ from its configuration in the others only.
HYPERPARAMETERS = frozenset(
    {
        "num_envs",
        "num_steps",
        "num_iterations",
        "update_epochs",
        "num_minibatches",
        "learning_rate",
        "anneal_lr",
        "gamma",
        "gae_lambda",
        "clip_coef",
        "clip_vloss",
        "ent_coef",
        "vf_coef",
        "max_grad_norm",
        "norm_adv",
        "norm_obs",
        "norm_reward",
    }
)


def key(flag: str) -> str:
    """A flag as the config.json key it sets: "--num-envs" (or "--num_envs") -> "num_envs"."""
    return flag.removeprefix("--").replace("-", "_")


def flags(command) -> dict[str, Union[str, bool]]:
    """The flags of an argv (its first word, the script, aside), each as its config.json key: the
    value of "--flag value" or "--flag=value" as written, True for a flag without a value, False for
    "--no-flag"; the last wins, as in the scripts' parser. ValueError for a word that is neither a
    flag nor a flag's value."""
    found, words, i = {}, list(command[1:]), 0
    while i < len(words):
        word = words[i]
        if not word.startswith("--") or word == "--":
            raise ValueError(f"{word!r} is not a flag")
        name, equals, value = word.partition("=")
        if equals:
            found[key(name)] = value
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            found[key(name)] = words[i + 1]
            i += 1
        elif name.startswith("--no-"):
            found[key(name.removeprefix("--no-"))] = False
        else:
            found[key(name)] = True
        i += 1
    return found


def same_value(written: Union[str, bool], value) -> bool:
    """Whether a flag's value as written means the value a config holds: a bool for a flag without a
    value, a number equal as a number ("2.5e-4" is 0.00025), a text equal as text."""
    if isinstance(value, bool) or isinstance(written, bool):
        return written is value
    if isinstance(value, (int, float)):
        try:
            return float(written) == value
        except ValueError:
            return False
    return written == value


def same_flag(one: Union[str, bool], other: Union[str, bool]) -> bool:
    """Whether two flags' values as written mean the same: equal bools, equal numbers ("2.5e-4",
    "0.00025") or equal texts."""
    if isinstance(one, bool) or isinstance(other, bool):
        return one is other
    try:
        return float(one) == float(other)
    except ValueError:
        return one == other


def differing_flags(command, wanted) -> list[str]:
    """The flags (as config keys) that change what a run learns (HYPERPARAMETERS, and any flag
    `wanted` gives) whose values differ between two argvs, sorted: one gives a flag the other does
    not, or another value."""
    wanted_flags = flags(wanted)
    names = HYPERPARAMETERS | set(wanted_flags)
    one = {name: value for name, value in flags(command).items() if name in names}
    other = {name: value for name, value in wanted_flags.items() if name in names}
    return sorted(
        name
        for name in one.keys() | other.keys()
        if name not in one or name not in other or not same_flag(one[name], other[name])
    )

"""The env ids the scripts know, as fixed lists (part of benchback-rl): a mistyped --env is refused
before JAX loads (the scripts' command line check), and a checkpoint's env id is checked without
handing it to a library (the evaluation). The standard library only.

    why = env_ids.unknown("CartPol-v1", "gymnax")  # None when known, else why, in words
    env_ids.packages("brax-ant", "gymnax")  # its simulator's pip packages: ("brax", "mujoco", ...)
"""

import difflib
from typing import Optional

# gymnax 1.0.1's registered ids (gymnax.registered_envs; a test of the suite compares)
GYMNAX_ENVS = (
    "CartPole-v1 Pendulum-v1 Acrobot-v1 MountainCar-v0 MountainCarContinuous-v0 Asterix-MinAtar"
    " Breakout-MinAtar Freeway-MinAtar Seaquest-MinAtar SpaceInvaders-MinAtar Catch-bsuite"
    " DeepSea-bsuite MemoryChain-bsuite UmbrellaChain-bsuite DiscountingChain-bsuite"
    " MNISTBandit-bsuite SimpleBandit-bsuite FourRooms-misc MetaMaze-misc PointRobot-misc"
    " BernoulliBandit-misc GaussianBandit-misc Reacher-misc Swimmer-misc Pong-misc FrozenLake-misc"
).split()
# gymnax ids the scripts refuse, and why: gymnax makes MNISTBandit from MNIST, which it downloads
# then (urlretrieve into /tmp/mnist: no timeout, no checksum, a cut download kept as done)
REFUSED = {"MNISTBandit-bsuite": "cannot be made without downloading MNIST (gymnax's load_mnist)"}
# expensive JAX envs (pip package craftax)
CRAFTAX_ENVS = ("Craftax-Classic-Symbolic-v1", "Craftax-Symbolic-v1")
# Brax envs (pip package brax) and each one's physics backend, by measurement on 2 busy CPU cores
# (the compile of the jitted reset + step; a step's median at 4 / 32 / 256 envs): generalized
# wins both on halfcheetah (21 + 22 s; 4.6 / 16 / 121 ms, against MJX's 36 + 40 s; 10.7 / 26 / 144
# ms); on ant, MJX steps 2.6x faster at 32 envs (46 + 62 s; 4.2 / 5.2 / 31 ms, against 22 + 18 s;
# 4.0 / 14 / 50 ms), for about 40 s more compile.
BRAX_ENVS = {"brax-halfcheetah": ("halfcheetah", "generalized"), "brax-ant": ("ant", "mjx")}
# MuJoCo Playground's DM Control suite (pip package playground; its envs' own names, prefixed):
# every state-based env, each trained by Playground's published Brax PPO config in 60M-100M steps
PLAYGROUND_ENVS = tuple(
    f"playground-{name}"
    for name in (
        "AcrobotSwingup AcrobotSwingupSparse BallInCup CartpoleBalance CartpoleBalanceSparse"
        " CartpoleSwingup CartpoleSwingupSparse CheetahRun FingerSpin FingerTurnEasy FingerTurnHard"
        " FishSwim HopperHop HopperStand HumanoidRun HumanoidStand HumanoidWalk PendulumSwingup"
        " PointMass ReacherEasy ReacherHard SwimmerSwimmer6 WalkerRun WalkerStand WalkerWalk"
    ).split()
)
# envpool's CPU simulators that env_adapters.make_envpool adapts (--env-backend envpool)
ENVPOOL_ENVS = tuple(
    "CartPole-v1 Acrobot-v1 MountainCar-v0 MountainCarContinuous-v0 Pendulum-v1 Ant-v4"
    " HalfCheetah-v4 Hopper-v4 Humanoid-v4 HumanoidStandup-v4 InvertedDoublePendulum-v4"
    " InvertedPendulum-v4 Pusher-v4 Reacher-v4 Swimmer-v4 Walker2d-v4".split()
)
TRAINED_GYMNAX_ENVS = tuple(env for env in GYMNAX_ENVS if env not in REFUSED)
GYMNAX_BACKEND_ENVS = (*TRAINED_GYMNAX_ENVS, *CRAFTAX_ENVS, *BRAX_ENVS, *PLAYGROUND_ENVS)
# Brax's physics, which Playground's envs run too (its envs are Brax's)
MUJOCO = ("brax", "mujoco", "mujoco-mjx")


def packages(env: str, backend: str) -> tuple[str, ...]:
    """The pip packages of env's own simulator beyond gymnax, by their distribution names: what a
    run records the versions of (config.json) and a Hub folder pins."""
    if backend == "envpool":
        return ("envpool",)
    if env in CRAFTAX_ENVS:
        return ("craftax",)
    if env in BRAX_ENVS:
        return MUJOCO
    return ("playground", *MUJOCO) if env in PLAYGROUND_ENVS else ()


def unknown(env: str, backend: str) -> Optional[str]:
    """Why env is not an id the scripts know on backend ("gymnax" or "envpool"), in words that name
    the closest known ids (or every one, when none is close); None when it is one. A gymnax id the
    scripts refuse (REFUSED) is told why, with every id they know."""
    if backend == "envpool":
        valid, kind = ENVPOOL_ENVS, "an envpool env"
    elif backend == "gymnax":
        if env in ENVPOOL_ENVS and env not in GYMNAX_BACKEND_ENVS:
            return "is an envpool env: add --env-backend envpool"
        valid, kind = GYMNAX_BACKEND_ENVS, "a gymnax, Craftax, Brax or Playground env"
    else:
        return f"names backend {backend!r}, not gymnax or envpool"
    if env in valid:
        return None
    if backend == "gymnax" and env in REFUSED:
        return f"{REFUSED[env]}; the scripts train {', '.join(valid)}"
    close = difflib.get_close_matches(env, valid, n=3, cutoff=0.6)
    if close:
        return f"is not {kind} (did you mean {' or '.join(map(repr, close))}?)"
    return f"is not {kind}; those are {', '.join(valid)}"

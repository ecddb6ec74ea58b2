"""The run matrix of a sweep: every run of a selection (sweep_options.Selection), its command, and
its shard.

Matrix: for each experiment, seed, env, model size and number of agents per process (a *cell*),
every variant (a value of each run axis but agents per process: the data type), sync setting,
framework and compile mode of the experiment, in the study's order (sync "both": every framework
sync off, then every one sync on; dtypes float32 and bfloat16: all of float32's runs, then
bfloat16's, whose commands add --dtype bfloat16). A run of N agents (an
experiment's agents) adds --num-agents N (N = 1 names none: the scripts' default) and trains seeds
--seed .. --seed + N - 1: the r-th seed of --seeds S (r = 0 .. S-1) is --seed 1 + r*N, so the S runs
of N agents of an env and size train disjoint agent seeds. An env is an env label
(study.env_label): the env id on gymnax, "{id}@envpool" on envpool, whose runs get --env-backend
envpool (and --env-threads N from bench.sh --cpus N), so the two backends of one env id are two
cells. Sharding deals out whole cells, so every run of a cell lands on the same shard and a speedup
never compares two machines."""

import hashlib
from dataclasses import dataclass, replace
from itertools import product

from core import study
from core.option_checks import MAX_RUNS, BadOption
from sweep.options import DEFAULT_MODE, Selection

# the run axes each run of a cell takes every value of, one after another (--dtype: its runs are
# compared on one machine); agents per process make cells of their own, as sizes do, and space the
# seeds (first_seed)
VARIANT_AXES = [axis for axis in study.RUN_AXES if axis.key != "num_agents"]


@dataclass(frozen=True)
class PlannedRun:
    """One run of the sweep's matrix, as planned (runlog.Run is a run as it was written)."""

    experiment: str
    seed: int
    # an env label (study.env_label), e.g. "CartPole-v1" (gymnax) or "CartPole-v1@envpool"
    env: str
    size: str
    framework: str
    compile: str
    sync: bool
    command: tuple[str, ...]  # python, script, arguments
    # its experiment runs sync off and on: the description and the log name say which
    both_syncs: bool = False
    # its value of each of VARIANT_AXES (its --dtype), the defaults by default; the description
    # and the log name say those that are not the default
    variant: tuple = ()
    # the script's --num-agents (seeds seed .. seed + agents - 1); said when it is not 1
    agents: int = 1

    @property
    def sync_name(self) -> str:
        return f" sync {'on' if self.sync else 'off'}" if self.both_syncs else ""

    @property
    def variant_name(self) -> str:  # " bfloat16"
        values = zip(VARIANT_AXES, self.variant)
        return "".join(f" {value}" for axis, value in values if value != axis.default)

    @property
    def agents_name(self) -> str:  # in the log name, as the dtype's
        return "" if self.agents == 1 else f" agents{self.agents}"

    @property
    def seed_name(self) -> str:  # "seed 5" of one agent, "4 agents, seeds 5-8" of four
        last = self.seed + self.agents - 1
        return (
            f"seed {self.seed}"
            if self.agents == 1
            else f"{self.agents} agents, seeds {self.seed}-{last}"
        )

    @property
    def cell(self) -> tuple:
        # one agent's cell is the one it was before agents per process existed: its lock's name and
        # its shard stay those of a sweep begun earlier
        agents = (self.agents,) if self.agents != 1 else ()
        return (self.experiment, self.seed, self.env, self.size, *agents)

    @property
    def description(self) -> str:
        return (
            f"{self.experiment} {self.env} {self.framework} {self.size} "
            f"{self.compile}{self.variant_name}{self.sync_name} {self.seed_name}"
        )

    @property
    def log_stem(self) -> str:  # bench.sh adds __{unix time}.log
        sync = self.sync_name.replace(" sync on", "__sync").replace(" sync off", "__nosync")
        variant = (self.variant_name + self.agents_name).replace(" ", "__")
        run = (
            f"{self.env}__{self.framework}__{self.size}__{self.compile}{variant}{sync}__{self.seed}"
        )
        return f"logs/{self.experiment}/{run}"


def option(name: str, value: str) -> list[str]:
    """A run's option and value, as two words; as one, --name=VALUE, when VALUE starts with "-" (a
    tag "-x", a log dir "-runs"), which the script's parser would otherwise read as another option.
    """
    return [f"{name}={value}"] if value.startswith("-") else [name, value]


def command(
    sel: Selection,
    exp: study.Experiment,
    fw: study.Framework,
    env: str,
    size: str,
    mode: str,
    seed: int,
    sync: bool,
    variant: tuple = (),
    agents: int = 1,
) -> tuple[str, ...]:
    """A run's command. env: an env label; a gymnax run's command names no backend, a float32 one no
    --dtype (a variant's default value, no flag), a run of one agent no --num-agents (the scripts'
    defaults, as before there were more).
    """
    env_id, backend = study.split_label(env)
    cmd = [
        sel.python,
        str(fw.script_path(study.ROOT)),
        "--env",
        env_id,
        "--model-size",
        size,
        "--compile",
        mode,
        "--seed",
        str(seed),
        *option("--log-dir", f"{sel.log_dir.rstrip('/')}/{exp.name}"),
        "--exp-name",
        exp.name,
    ]
    if backend != study.BACKENDS[0]:
        cmd += ["--env-backend", backend]
    if backend == "envpool" and sel.env_threads is not None:  # a gymnax run has no use for it
        cmd += ["--env-threads", str(sel.env_threads)]
    if agents != 1:
        cmd += ["--num-agents", str(agents)]
    # a learning experiment's reference configuration, before --iterations may cut it
    cmd += exp.env_args(env)
    if sel.iterations is not None:
        cmd += ["--num-iterations", str(sel.iterations)]
    if sel.tag is not None:
        cmd += option("--tag", sel.tag)
    if not sync:
        cmd += ["--no-sync-timing"]
    for axis, value in zip(VARIANT_AXES, variant):
        if value != axis.default:
            cmd += [axis.flag, str(value)]
    # the scripts save a run's state on gymnax only
    if sel.save_every and backend == study.BACKENDS[0]:
        cmd += ["--save-every", str(sel.save_every)]
    return (*cmd, *sel.extra)


def kept_modes(sel: Selection, exp: study.Experiment, fw: study.Framework) -> tuple[str, ...]:
    """The experiment's compile modes of this framework that --compile-modes keeps (all of them when
    not given)."""
    modes = exp.compile_modes(fw)
    if sel.compile_modes is None:
        return modes
    wanted = set(sel.compile_modes)
    if DEFAULT_MODE in wanted:
        wanted.add(fw.default_compile)
    return tuple(mode for mode in modes if mode in wanted)


def takes_outside_env(exp: study.Experiment, env: str, the_study: study.Study) -> bool:
    """Whether an env label of --envs outside the study joins this experiment: a gymnax env joins
    the experiments of envs "all", an env on another backend (e.g. "Humanoid-v4@envpool") those that
    run that backend alone."""
    backend = study.split_label(env)[1]
    return (
        exp.envs == the_study.envs if backend == study.BACKENDS[0] else exp.backends == (backend,)
    )


def experiment_envs(
    sel: Selection, exp: study.Experiment, the_study: study.Study
) -> tuple[str, ...]:
    """The env labels of an experiment in this sweep: its own, or those of --envs it has (in the
    order given), and those of --envs outside the study that it takes (takes_outside_env)."""
    if sel.envs is None:
        return exp.envs
    return tuple(
        env
        for env in sel.envs
        if env in exp.envs
        or (env not in the_study.every_env and takes_outside_env(exp, env, the_study))
    )


def first_seed(repeat: int, agents: int) -> int:
    """The --seed of a run of `agents` agents, the repeat-th (0-based) of bench.sh --seeds: seeds 1,
    2, 3, ... of one agent; 1, 5, 9, ... of four (agents 1-4, 5-8, 9-12: disjoint)."""
    return 1 + repeat * agents


def matrix(sel: Selection, the_study: study.Study) -> list[PlannedRun]:
    """Every run of the selection, cell after cell (experiments, seeds, envs, sizes, agents); within
    a cell, every data type, sync setting, framework and compile mode of the experiment, one after
    another. The study's order throughout; envs in the order given."""
    runs = []
    frameworks = [fw for name, fw in the_study.frameworks.items() if name in sel.frameworks]
    for exp in (exp for name, exp in the_study.experiments.items() if name in sel.experiments):
        sizes = [size for size in the_study.sizes if size in sel.sizes and size in exp.sizes]
        for repeat, env, size, agents in product(
            range(sel.seeds), experiment_envs(sel, exp, the_study), sizes, exp.agents
        ):
            seed = first_seed(repeat, agents)
            variants = product(*[getattr(exp, axis.field) for axis in VARIANT_AXES])
            for variant, sync, fw in product(variants, exp.syncs, frameworks):
                for mode in kept_modes(sel, exp, fw):
                    runs.append(
                        PlannedRun(
                            exp.name,
                            seed,
                            env,
                            size,
                            fw.name,
                            mode,
                            sync,
                            command(sel, exp, fw, env, size, mode, seed, sync, variant, agents),
                            both_syncs=len(exp.syncs) > 1,
                            variant=variant,
                            agents=agents,
                        )
                    )
    return runs


def bounded_matrix(sel: Selection, the_study: study.Study) -> list[PlannedRun]:
    """matrix(), when it holds at most MAX_RUNS runs; else BadOption, found from the runs of one
    seed before any more are made (--seeds 2000000 would take minutes to plan)."""
    per_seed = len(matrix(replace(sel, seeds=1), the_study))
    if per_seed * sel.seeds > MAX_RUNS:
        most = MAX_RUNS // per_seed
        valid = f"valid: 1 to {most} with these options" if most else "narrow the sweep"
        raise BadOption(
            f"--seeds {sel.seeds} makes {per_seed * sel.seeds} runs, more than the {MAX_RUNS} a "
            f"sweep may plan; {valid}"
        )
    return matrix(sel, the_study)


def cells(runs: list[PlannedRun]) -> list[tuple]:
    return list(dict.fromkeys(run.cell for run in runs))


def shard_of_cells(all_cells: list[tuple], n: int) -> dict[tuple, int]:
    """Each cell's shard: cells are dealt out in turn, in a fixed scrambled order (a hash of the
    cell).

    So the shards differ by at most one cell, and no shard gets all of one size or env (dealing in
    matrix order would, e.g. every large cell to one shard when N is the number of sizes)."""
    order = sorted(all_cells, key=lambda cell: hashlib.sha256(repr(cell).encode()).hexdigest())
    return {cell: i % n for i, cell in enumerate(order)}


def shard_runs(runs: list[PlannedRun], k: int, n: int) -> list[PlannedRun]:
    """This shard's runs, in matrix order."""
    owner = shard_of_cells(cells(runs), n)
    return [run for run in runs if owner[run.cell] == k]


def cell_id(cell: tuple) -> str:
    """A cell's name in file names (its lock): a hash of it."""
    return hashlib.sha256(repr(cell).encode()).hexdigest()[:16]

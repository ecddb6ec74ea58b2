"""Tests of bench.sh and python -m sweep (the experiment matrix from the study, options, shards by
cell, resume, Ctrl-C, failures, env timing) and sweep/env_timing.py.

Expected counts come from the study (study.toml through core/study.py), never from hard-coded
numbers. The mini sweep is one real run (every script's, through bench.sh: test_smoke.py)."""

import os
import re
import signal
import socket
import subprocess
import sys
from itertools import product
from pathlib import Path

import pytest
from sweep_runs import (
    NOTING_PYTHON,
    bench,
    cell_of,
    done_lines,
    dry_run,
    env_of,
    fake_run,
    framework_of,
    last_line,
    linen_small_plan,
    option,
    other_study,
    planned,
    timing_file,
)

from core import study
from helpers import ENV_TIMING_MODULE, ROOT, STUDY, one_cell, read_json, wait_until
from sweep import bench as sweep_bench
from sweep import cli as sweep_cli
from sweep import env_timing_check as sweep_env_timing
from sweep import matrix as sweep_matrix

TINY = ["--", "--num-envs", "4", "--num-steps", "16"]
MEMORY_CHAIN_LINEN = ["--envs", "MemoryChain-bsuite", "--frameworks", "linen"]


def selected_envs(exp, envs, study=STUDY) -> list[str]:
    """An experiment's envs in a sweep of --envs `envs` (None: its own): those of its own, and for
    envs "all" also those outside the study."""
    if envs is None:
        return list(exp.envs)
    outside = exp.envs == study.envs
    return [e for e in envs if e in exp.envs or (outside and e not in study.every_env)]


def expected_count(
    study=STUDY, experiments=None, frameworks=None, envs=None, sizes=None, seeds=1
) -> int:
    """The number of runs the study defines for a selection (None: all of the study)."""
    total = 0
    for exp in study.experiments.values():
        if experiments is None or exp.name in experiments:
            cells = [
                (e, s)
                for e, s in product(selected_envs(exp, envs, study), sizes or study.sizes)
                if s in exp.sizes
            ]
            modes = sum(
                len(exp.compile_modes(fw))
                for fw in study.frameworks.values()
                if frameworks is None or fw.name in frameworks
            )
            runs_per_cell = modes * len(exp.syncs) * len(exp.dtypes)
            total += seeds * len(cells) * len(exp.agents) * runs_per_cell
    return total


# ------------------------------------------------------------------------------------------ matrix
@pytest.mark.parametrize("exp", STUDY.experiments)
def test_dry_run_counts(tmp_path, exp):
    assert len(dry_run(tmp_path, "--experiments", exp, "--seeds", "1")) == expected_count(
        experiments=[exp]
    )
    # default 3 seeds
    assert len(dry_run(tmp_path, "--experiments", exp)) == expected_count(
        experiments=[exp], seeds=3
    )


def test_dry_run_all_experiments(tmp_path):
    lines = dry_run(tmp_path, "--seeds", "1")
    assert len(lines) == expected_count()
    # exp2 and exp3 overlap in settings but not in log dir or --exp-name
    assert len(set(lines)) == len(lines)


def test_dry_run_matrix_contents(tmp_path):
    lines = dry_run(tmp_path, "--seeds", "1")
    by_exp = {
        exp: [line for line in lines if option(line, "--log-dir") == f"{tmp_path}/runs/{exp}"]
        for exp in STUDY.experiments
    }
    for name, exp in STUDY.experiments.items():
        runs = by_exp[name]
        assert len(runs) == expected_count(experiments=[name])
        assert {option(line, "--exp-name") for line in runs} == {name}  # the W&B group
        syncs = [not line.endswith("--no-sync-timing") for line in runs]
        assert set(syncs) == set(exp.syncs) and syncs.count(True) * len(exp.syncs) == len(
            runs
        ) * exp.syncs.count(True)
        assert not any(" --sync-timing" in line for line in runs)
        modes = {(framework_of(line), option(line, "--compile")) for line in runs}
        assert modes == {
            (fw.name, mode) for fw in STUDY.frameworks.values() for mode in exp.compile_modes(fw)
        }
        assert {option(line, "--model-size") for line in runs} == set(exp.sizes)
        # in the study's order
        assert list(dict.fromkeys(env_of(line) for line in runs)) == list(exp.envs)


# A study that shares no framework, script, compile mode, size, env or experiment with study.toml
OTHER_STUDY = """
sizes = ["tiny", "huge"]
envs = ["Nowhere-v0", "Elsewhere-v3"]

[windows]
steady = { first = 1, label = "iterations 1+" }

[frameworks.alpha]
script = "ppo_alpha.py"
compile = ["fast", "slow"]

[frameworks.beta]
script = "ppo_beta.py"
compile = ["quick", "careful", "none"]

[experiments.first]
title = "every env and mode"
envs = "all"
sizes = "all"
compile = "all"
sync = "both"

[experiments.second]
title = "one env"
envs = ["Elsewhere-v3"]
sizes = ["huge"]
compile = "default"
sync = true
"""


def test_bench_sh_runs_the_study_it_is_given(tmp_path):
    """The study lives in study.toml: given another study ($BENCHBACK_STUDY), bench.sh runs exactly
    its matrix (scripts, envs, sizes, compile modes, experiments, sync settings) and refuses
    study.toml's names, offering the other study's."""
    path = tmp_path / "other_study.toml"
    path.write_text(OTHER_STUDY)
    other = study.parse(path)
    env = {study.PATH_VARIABLE: str(path)}
    runs = [
        (
            framework_of(line, other),
            env_of(line),
            option(line, "--model-size"),
            option(line, "--compile"),
            option(line, "--exp-name"),
            " --no-sync-timing" not in line,
        )
        for line in dry_run(tmp_path, "--seeds", "1", env=env)
    ]
    wanted = [
        (framework.name, env_label, size, mode, exp.name, sync)
        for exp in other.experiments.values()
        for env_label in exp.envs
        for size in exp.sizes
        for framework in other.frameworks.values()
        for mode in exp.compile_modes(framework)
        for sync in exp.syncs
    ]
    assert sorted(runs) == sorted(wanted)
    committed = {
        "--frameworks": (next(iter(STUDY.frameworks)), other.frameworks),
        "--sizes": (STUDY.sizes[0], other.sizes),
        "--experiments": (next(iter(STUDY.experiments)), other.experiments),
    }
    for flag, (name, choices) in committed.items():
        proc = bench("--dry-run", "--log-dir", str(tmp_path / "runs"), flag, name, env=env)
        assert proc.returncode == 2 and f"valid choices: {', '.join(choices)}" in proc.stderr


@pytest.mark.parametrize(
    "args,selection",
    [
        (
            [
                "--frameworks",
                "linen",
                "--envs",
                "CartPole-v1,Acrobot-v1",
                "--sizes",
                "small,large",
                "--seeds",
                "2",
            ],
            dict(
                frameworks=["linen"],
                envs=["CartPole-v1", "Acrobot-v1"],
                sizes=["small", "large"],
                seeds=2,
            ),
        ),
        (
            [
                "--experiments",
                "exp1,exp2",
                "--frameworks",
                "nnx,torch",
                "--sizes",
                "medium",
                "--seeds",
                "1",
            ],
            dict(experiments=["exp1", "exp2"], frameworks=["nnx", "torch"], sizes=["medium"]),
        ),
        (
            ["--experiments", "exp2,exp3", "--frameworks", "torch", "--seeds", "1"],
            dict(experiments=["exp2", "exp3"], frameworks=["torch"]),
        ),
    ],
)
def test_dry_run_narrowed(tmp_path, args, selection):
    assert len(dry_run(tmp_path, *args)) == expected_count(**selection)


def test_dry_run_passes_options(tmp_path):
    lines = dry_run(
        tmp_path,
        "--experiments",
        "exp1",
        "--seeds",
        "2",
        "--iterations",
        "7",
        "--tag",
        "mac",
        "--envs",
        "CartPole-v1",
        "--frameworks",
        "linen",
        "--sizes",
        "small",
        *TINY,
    )
    assert len(lines) == 2
    for seed, line in enumerate(lines, 1):
        assert line.startswith(
            f"{sys.executable} {ROOT}/ppo_linen.py --env CartPole-v1 --model-size small "
        )
        assert f"--seed {seed} " in line and "--num-iterations 7 " in line and "--tag mac " in line
        assert "--exp-name exp1 " in line
        assert line.endswith("--no-sync-timing --num-envs 4 --num-steps 16")


def test_compile_modes_keeps_the_default_or_the_named_modes(tmp_path):
    base = ["--experiments", "exp3", "--sizes", "large", "--seeds", "1"]
    lines = dry_run(tmp_path, *base, "--compile-modes", "default")
    assert [(framework_of(line), option(line, "--compile")) for line in lines] == [
        (name, fw.compile[0]) for name, fw in STUDY.frameworks.items()
    ]
    lines = dry_run(tmp_path, *base, "--compile-modes", "torchscript,default")
    modes = {(framework_of(line), option(line, "--compile")) for line in lines}
    assert modes == {(name, fw.compile[0]) for name, fw in STUDY.frameworks.items()} | {
        ("torch", "torchscript")
    }
    # a mode outside an experiment's own is not added: exp1 runs the default modes only, so this
    # selects no run, which is refused
    args = ["--experiments", "exp1", "--envs", "CartPole-v1", "--seeds", "1"]
    proc = bench("--dry-run", "--log-dir", str(tmp_path / "runs"), *args, "--compile-modes", "none")
    assert proc.returncode == 2 and "selects no runs" in proc.stderr


def test_an_env_outside_the_study_that_gymnax_knows_is_allowed(tmp_path):
    lines = dry_run(tmp_path, "--experiments", "exp1", "--seeds", "1", "--envs", "Catch-bsuite")
    assert {option(line, "--env") for line in lines} == {"Catch-bsuite"}
    assert len(lines) == expected_count(experiments=["exp1"], envs=["Catch-bsuite"])
    assert len(lines) == len(STUDY.sizes) * len(STUDY.frameworks)


# ------------------------------------------------ exp5 and exp6: the expensive and continuous envs
def assert_every_env_size_and_framework_sync_off_and_on(
    lines: list[str], name: str, envs: tuple[str, ...]
) -> None:
    """The dry run of an experiment of sync "both" and default compile modes: every env x size x
    framework, each once sync off and once on; in each cell every framework sync off, then every one
    sync on."""
    assert STUDY.experiments[name].syncs == (False, True)
    assert len(lines) == len(envs) * len(STUDY.sizes) * len(STUDY.frameworks) * 2
    expected = {
        (env, size, fw_name, fw.default_compile, sync)
        for env, size, (fw_name, fw), sync in product(
            envs, STUDY.sizes, STUDY.frameworks.items(), (False, True)
        )
    }
    got = {
        (
            option(line, "--env"),
            option(line, "--model-size"),
            framework_of(line),
            option(line, "--compile"),
            not line.endswith("--no-sync-timing"),
        )
        for line in lines
    }
    assert got == expected
    assert {option(line, "--exp-name") for line in lines} == {name}
    # each cell: every framework sync off, then sync on
    for cell in dict.fromkeys(cell_of(line) for line in lines):
        syncs = [not line.endswith("--no-sync-timing") for line in lines if cell_of(line) == cell]
        assert syncs == [False] * len(STUDY.frameworks) + [True] * len(STUDY.frameworks)


def test_exp5_runs_every_expensive_env_size_and_framework_sync_off_and_on(tmp_path):
    lines = dry_run(tmp_path, "--experiments", "exp5", "--seeds", "1")
    assert_every_env_size_and_framework_sync_off_and_on(lines, "exp5", STUDY.expensive_envs)


def test_exp6_runs_every_continuous_env_size_and_framework_sync_off_and_on(tmp_path):
    lines = dry_run(tmp_path, "--experiments", "exp6", "--seeds", "1")
    assert (
        STUDY.continuous_envs == STUDY.experiments["exp6"].envs
        and "Pendulum-v1" in STUDY.continuous_envs
    )
    assert_every_env_size_and_framework_sync_off_and_on(lines, "exp6", STUDY.continuous_envs)


def test_the_expensive_and_continuous_envs_stay_out_of_the_other_experiments(tmp_path):
    lines = dry_run(tmp_path, "--seeds", "1")
    for line in lines:
        assert (option(line, "--env") in STUDY.expensive_envs) == (
            option(line, "--exp-name") == "exp5"
        )
        assert (option(line, "--env") in STUDY.continuous_envs) == (
            option(line, "--exp-name") == "exp6"
        )
    asked = dry_run(tmp_path, "--seeds", "1", "--envs", f"CartPole-v1,{STUDY.continuous_envs[0]}")
    assert {(option(line, "--exp-name"), env_of(line)) for line in asked} == {
        ("exp1", "CartPole-v1"),
        ("exp2", "CartPole-v1"),
        ("exp7", "CartPole-v1"),  # on gymnax: CartPole-v1@envpool is another env
        ("exp9", "CartPole-v1"),  # the learning experiment's CartPole-v1, on gymnax
        ("exp11", "CartPole-v1"),  # agents per process: CleanRL's batch
        ("exp12", "CartPole-v1"),  # and the scripts'
        ("exp13", "CartPole-v1"),  # exp9's at 10 agents per process
        ("exp6", STUDY.continuous_envs[0]),
    }
    asked = dry_run(tmp_path, "--seeds", "1", "--envs", f"CartPole-v1,{STUDY.expensive_envs[0]}")
    assert {(option(line, "--exp-name"), env_of(line)) for line in asked} == {
        ("exp1", "CartPole-v1"),
        ("exp2", "CartPole-v1"),
        ("exp7", "CartPole-v1"),
        ("exp9", "CartPole-v1"),
        ("exp11", "CartPole-v1"),
        ("exp12", "CartPole-v1"),
        ("exp13", "CartPole-v1"),
        ("exp5", STUDY.expensive_envs[0]),
    }
    assert len(asked) == expected_count(envs=["CartPole-v1", STUDY.expensive_envs[0]])


def test_the_plan_names_the_sync_setting_of_exp5_runs(tmp_path):
    rows = linen_small_plan(tmp_path, "exp1,exp5")
    descriptions, stems = [row[1] for row in rows], [row[2] for row in rows]
    assert len(set(descriptions)) == len(set(stems)) == len(rows)
    assert not any(
        "sync" in text for row in rows if row[1].startswith("exp1 ") for text in row[1:3]
    )
    env = STUDY.expensive_envs[0]
    assert f"exp5 {env} linen small jit sync off seed 1" in descriptions
    assert f"exp5 {env} linen small jit sync on seed 1" in descriptions
    assert {
        f"logs/exp5/{env}__linen__small__jit__nosync__1",
        f"logs/exp5/{env}__linen__small__jit__sync__1",
    } <= set(stems)


# --------------------------------------------------------------------------- exp10: the data types
def test_exp10_runs_every_size_and_framework_in_each_data_type(tmp_path):
    """exp10: Acrobot-v1 x every size x framework in its default mode, sync on; in each cell every
    framework in float32 (no --dtype: the scripts' default), then every one with --dtype bfloat16.
    """
    lines = dry_run(tmp_path, "--experiments", "exp10", "--seeds", "1")
    exp = STUDY.experiments["exp10"]
    assert exp.dtypes == ("float32", "bfloat16") and exp.envs == ("Acrobot-v1",)
    assert len(lines) == len(STUDY.sizes) * len(STUDY.frameworks) * 2
    frameworks = list(STUDY.frameworks)
    for cell in dict.fromkeys(cell_of(line) for line in lines):
        mine = [line for line in lines if cell_of(line) == cell]
        dtypes = [option(line, "--dtype") if " --dtype " in line else "float32" for line in mine]
        assert dtypes == ["float32"] * len(frameworks) + ["bfloat16"] * len(frameworks)
        assert [framework_of(line) for line in mine] == frameworks * 2
        assert not any(line.endswith("--no-sync-timing") for line in mine)


def test_the_plan_names_the_data_type_of_exp10s_bfloat16_runs(tmp_path):
    """A bfloat16 run's description and log name say its data type (a float32 run's, as before, do
    not), so no two runs of a cell share a log name."""
    rows = linen_small_plan(tmp_path, "exp10")
    assert [row[1:3] for row in rows] == [
        ["exp10 Acrobot-v1 linen small jit seed 1", "logs/exp10/Acrobot-v1__linen__small__jit__1"],
        [
            "exp10 Acrobot-v1 linen small jit bfloat16 seed 1",
            "logs/exp10/Acrobot-v1__linen__small__jit__bfloat16__1",
        ],
    ]
    assert rows[1][-2:] == ["--dtype", "bfloat16"] and "--dtype" not in rows[0]


# ------------------------------------------------------------------------------- a fifth framework
FAKE_FRAMEWORK = (
    '[frameworks.fake]\nscript = "ppo_fake.py"\ncompile = ["fast", "slow"]\ncolor = "#000000"\n'
)


def test_a_fifth_framework_in_the_study_joins_every_experiment(tmp_path):
    env = other_study(tmp_path, FAKE_FRAMEWORK)
    lines = dry_run(tmp_path, "--seeds", "1", env=env)
    fake = [line for line in lines if "/ppo_fake.py " in line]
    for name, exp in STUDY.experiments.items():
        runs = [line for line in fake if option(line, "--exp-name") == name]
        assert len(runs) == len(exp.envs) * len(exp.sizes) * (
            2 if exp.all_compile_modes else 1
        ) * len(exp.syncs) * len(exp.dtypes) * len(exp.agents)
        assert {option(line, "--compile") for line in runs} == (
            {"fast", "slow"} if exp.all_compile_modes else {"fast"}
        )
    assert len(lines) - len(fake) == expected_count()
    assert (
        "fake"
        in bench("--dry-run", "--frameworks", "fake,linen", "--experiments", "exp3", env=env).stdout
    )
    # a real sweep refuses a framework whose script is missing, in one line
    proc = bench(
        "--log-dir", str(tmp_path / "runs"), "--frameworks", "fake", "--no-env-timing", env=env
    )
    assert (
        proc.returncode == 2
        and len(proc.stderr.strip().splitlines()) == 1
        and "ppo_fake.py" in proc.stderr
    )
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------------------ shards
@pytest.mark.parametrize("shards", [2, 3, 5])
def test_shards_split_the_matrix_by_cell(tmp_path, shards):
    whole = dry_run(tmp_path, "--seeds", "2")
    parts = [dry_run(tmp_path, "--seeds", "2", "--shard", f"{k}/{shards}") for k in range(shards)]
    assert sorted(line for part in parts for line in part) == sorted(whole)  # disjoint and covering
    shard_of_cell = {}
    for k, part in enumerate(parts):
        for line in part:
            # every run of a cell on one shard
            assert shard_of_cell.setdefault(cell_of(line), k) == k
    cells_per_shard = [len({cell_of(line) for line in part}) for part in parts]
    assert max(cells_per_shard) - min(cells_per_shard) <= 1  # balanced to within one cell
    for part in parts:  # every framework and compile mode of a cell, one after another
        cells_in_order = [cell_of(line) for line in part]
        assert cells_in_order == sorted(
            cells_in_order, key=[c for c in dict.fromkeys(cells_in_order)].index
        )
    # no shard gets every cell of one model size (dealing cells in matrix order would when N =
    # number of sizes)
    assert all(len({option(line, "--model-size") for line in part}) > 1 for part in parts)


def test_shard_of_cells_is_balanced_for_any_count():
    cells = [("exp1", 1, f"env{i}", "small") for i in range(17)]
    for n in range(1, 9):
        owner = sweep_matrix.shard_of_cells(cells, n)
        counts = [list(owner.values()).count(k) for k in range(n)]
        assert sum(counts) == len(cells) and max(counts) - min(counts) <= 1


# ------------------------------------------------------------------------------------------ options
@pytest.mark.parametrize(
    "args,bad",
    [
        (["--experiments", "exp1,exp99"], "exp99"),
        (["--frameworks", "jax"], "jax"),
        (["--sizes", "huge"], "huge"),
        (["--compile-modes", "jit,fast"], "fast"),
        (["--envs", "CartPole-v1,Nope-v0"], "Nope-v0"),
        (["--envs", ""], "--envs"),
        (["--seeds", "0"], "0"),
        (["--iterations", "ten"], "ten"),
        (["--shard", "3/3"], "3/3"),
        (["--shard", "1"], "--shard"),
        (["--timeout", "soon"], "soon"),
        (["--cpus", "0"], "--cpus"),
        (["--cpus", "999"], "999"),
        (["--bogus"], "--bogus"),
        (["--seeds"], "--seeds"),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path, args, bad):
    proc = bench("--dry-run", "--log-dir", str(tmp_path), *args)
    assert proc.returncode == 2, proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1 and bad in proc.stderr
    assert not (tmp_path / "exp1").exists()


def test_unknown_choices_name_the_valid_ones(tmp_path):
    proc = bench("--dry-run", "--frameworks", "jax")
    assert all(name in proc.stderr for name in STUDY.frameworks)
    proc = bench("--dry-run", "--envs", "Nope-v0")
    assert all(name in proc.stderr for name in STUDY.envs) and "gymnax" in proc.stderr


def test_help_lists_the_study_experiments():
    proc = bench("--help")
    assert proc.returncode == 0 and "--shard K/N" in proc.stdout and "exp4" in proc.stdout
    for exp in STUDY.experiments.values():
        assert re.search(rf"^  {exp.name} +{re.escape(exp.title)}", proc.stdout, re.M)


def test_help_lists_every_declared_option_with_its_help():
    """bench.sh --help's lists of options come from sweep/cli.py: each option of bench.sh, in its
    order, with its whole help."""
    proc = bench("--help")
    assert proc.returncode == 0, proc.stderr
    heads = re.findall(r"^  (-h, )?(--[a-z-]+)", proc.stdout, re.M)
    declared = [option for option in sweep_cli.OPTIONS if option.section]
    assert [name for _, name in heads] == [option.name for option in declared]
    text = " ".join(proc.stdout.split())
    for declared_option in declared:
        assert " ".join(declared_option.help.split()) in text, declared_option.name


BENCH_OPTIONS = [option for option in sweep_cli.OPTIONS if option.section]


def test_bench_sh_names_the_declared_options():
    """bench.sh's command line is read with sweep/cli.py's table: an unknown option's refusal lists
    them all."""
    proc = bench("--bogus")
    assert proc.returncode == 2
    listed = proc.stderr.split("valid options: ")[1].split(" (then -- extra run args)")[0].split()
    assert sorted(listed) == sorted(option.name for option in BENCH_OPTIONS)


@pytest.mark.parametrize("option", BENCH_OPTIONS, ids=lambda option: option.name)
def test_bench_sh_reads_each_declared_option(option):
    """A value option takes the next word, a flag none: what follows is read as an option."""
    value = [] if option.metavar is None else ["x"]
    proc = bench(option.name, *value, "--bogus")
    assert proc.returncode == 2 and "unknown option '--bogus'" in proc.stderr, proc.stderr


def test_bench_sh_takes_the_declared_defaults(tmp_path, monkeypatch):
    """An option declared in sweep/cli.py, with its default, reaches bench.sh's command line as
    declared: a new option is read by bench.sh at once, and the 300 s --kill-after is the table's.
    """
    new = sweep_cli.Option(
        "--kill-after", "SECONDS", "grace", actions=sweep_cli.SBATCH, default="7"
    )
    options = tuple(
        new if option.name == "--kill-after" else option for option in sweep_cli.OPTIONS
    )
    monkeypatch.setattr(sweep_cli, "OPTIONS", options)
    given, _ = sweep_bench.read_words(["--slurm", "--dry-run", "--timeout", "5"])
    assert sweep_bench.settings(given)["kill_after"] == "7"
    extra = sweep_cli.Option("--brand-new", "N", "a new option", actions=sweep_cli.SWEEP_ACTIONS)
    monkeypatch.setattr(sweep_cli, "OPTIONS", (*options, extra))
    assert sweep_bench.read_words(["--brand-new", "3", "--", "x"]) == ({"--brand-new": "3"}, ["x"])


# ------------------------------------------------------------------------------------------ resume


# six dry runs of bench.sh: ~30 s on a busy 2-core machine
@pytest.mark.slow
def test_resume_needs_a_completed_run_of_the_same_command(tmp_path):
    log_dir = tmp_path / "runs"
    same = ("--iterations", "5", "--", "--num-envs", "4")
    # linen's compile modes, in the study's order
    jit, none = planned(log_dir, "exp2", "CartPole-v1", *same)
    assert (
        option(" ".join(jit), "--compile") == "jit"
        and option(" ".join(none), "--compile") == "none"
    )
    fake_run(log_dir, "exp2", "completed", jit, "a")
    fake_run(log_dir, "exp2", "failed", none, "b")
    matching = done_lines(log_dir, *same)
    assert len(matching) == 1 and "--compile jit" in matching[0]  # the failed run is not done
    # other num_iterations
    assert not done_lines(log_dir, "--iterations", "6", "--", "--num-envs", "4")
    assert not done_lines(log_dir, "--iterations", "5")  # other extra arguments
    assert not done_lines(log_dir, "--iterations", "5", "--tag", "mac", "--", "--num-envs", "4")
    # the same command, not the same meaning
    assert not done_lines(log_dir, "--iterations", "5", "--", "--num-envs=4")


def test_resume_ignores_the_log_dir_spelling_but_not_the_script(tmp_path):
    log_dir = tmp_path / "runs"
    (jit, none) = planned(log_dir)
    moved = [
        f"./elsewhere/{v}" if i and jit[i - 1] == "--log-dir" else v for i, v in enumerate(jit)
    ]
    # the folder moved since: still found under the log dir
    fake_run(log_dir, "exp2", "completed", moved, "a")
    nnx = ["/somewhere/ppo_nnx.py", *none[1:]]
    fake_run(log_dir, "exp2", "completed", nnx, "b")  # another script with linen's arguments
    fake_run(log_dir, "exp2", "completed", None, "c")  # an old run without "command"
    assert [("--compile jit" in line) for line in done_lines(log_dir)] == [True]


def test_resume_tells_the_sync_settings_of_exp5_apart(tmp_path):
    log_dir, env = tmp_path / "runs", STUDY.expensive_envs[0]
    sync_off, sync_on = planned(log_dir, "exp5", env)
    assert sync_off[-1] == "--no-sync-timing" and "--no-sync-timing" not in sync_on
    fake_run(log_dir, "exp5", "completed", sync_off, "a")
    (done,) = done_lines(log_dir, exp="exp5", env=env)
    assert done.endswith("--no-sync-timing")
    fake_run(log_dir, "exp5", "completed", sync_on, "b")
    assert len(done_lines(log_dir, exp="exp5", env=env)) == 2


def test_resume_tells_the_data_types_of_exp10_apart(tmp_path):
    log_dir = tmp_path / "runs"
    float32, bfloat16 = planned(log_dir, "exp10", "Acrobot-v1")
    assert bfloat16[-2:] == ["--dtype", "bfloat16"] and "--dtype" not in float32
    fake_run(log_dir, "exp10", "completed", bfloat16, "a")
    (done,) = done_lines(log_dir, exp="exp10", env="Acrobot-v1")
    assert done.endswith("--dtype bfloat16")
    fake_run(log_dir, "exp10", "completed", float32, "b")
    assert len(done_lines(log_dir, exp="exp10", env="Acrobot-v1")) == 2


def test_resume_tells_exp2_and_exp3_copies_apart(tmp_path):
    log_dir = tmp_path / "runs"
    (exp3_jit, _) = planned(log_dir, "exp3", "Acrobot-v1")
    fake_run(log_dir, "exp3", "completed", exp3_jit, "a")
    # exp3's command in exp2's folder (--exp-name exp3)
    fake_run(log_dir, "exp2", "completed", exp3_jit, "b")
    assert len(done_lines(log_dir, exp="exp3", env="Acrobot-v1")) == 1
    assert not done_lines(log_dir, exp="exp2", env="Acrobot-v1")


# ------------------------------------------------------------------------------------------ Ctrl-C
FAKE_PYTHON = """#!/usr/bin/env bash
# A stand-in interpreter: real Python for python -m sweep; a run notes itself, presses Ctrl-C, waits
# for bench's SIGTERM.
case ${1:-} in
  */ppo_*.py)
    echo "$*" >> "$MARKS"
    if [[ -n ${SIGNALS:-} ]]; then exec "$REAL_PYTHON" -c "$COUNT_SIGNALS"; fi
    trap 'exit $EXIT_ON_TERM' TERM
    # Ctrl-C: SIGINT to the terminal's process group, bench.sh's (the run has one of its own)
    kill -INT -- -"$(ps -o pgid= -p "$PPID" | tr -d ' ')"
    while :; do sleep 0.05; done ;;
  -m)
    "$REAL_PYTHON" "$@"; rc=$?
    if [[ $2 == sweep && $3 == plan && $INTERRUPT_PLAN == 1 ]]; then kill -INT 0; fi
    exit $rc ;;
  *) exec "$REAL_PYTHON" "$@" ;;
esac
"""


# A run that takes SIGINT and SIGTERM as the scripts do (a Python handler, which a signal ignored at
# the start does not stop; the signals unblocked), notes each signal it gets in $SIGNALS, and exits
# 130 on the first TERM
COUNT_SIGNALS = """
import os, signal, sys, time
def note(signum, frame):
    with open(os.environ["SIGNALS"], "a") as f:
        f.write(signal.Signals(signum).name + "\\n")
    if signum == signal.SIGTERM:
        time.sleep(0.5)  # a SIGINT sent with it would arrive meanwhile
        sys.exit(130)
signal.signal(signal.SIGINT, note)
signal.signal(signal.SIGTERM, note)
# as the scripts do: a mask inherited from the test runner would hold them back
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
with open(os.environ["SIGNALS"], "a") as f:
    f.write("started\\n")
while True:
    time.sleep(0.05)
"""


def interrupted_sweep(
    tmp_path: Path, interrupt_plan: bool, exit_on_term: int = 130, count_signals: bool = False
):
    """bench.sh (2 runs) with the stand-in interpreter; returns (exit code, stdout, the runs
    started). count_signals: the run notes the signals it gets in tmp_path / "signals", and the
    test presses Ctrl-C once the run has started."""
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    marks = tmp_path / "marks"
    env = {
        **os.environ,
        "MARKS": str(marks),
        "REAL_PYTHON": sys.executable,
        "INTERRUPT_PLAN": str(int(interrupt_plan)),
        "EXIT_ON_TERM": str(exit_on_term),
        "COUNT_SIGNALS": COUNT_SIGNALS,
    }
    signals = tmp_path / "signals"
    if count_signals:
        env["SIGNALS"] = str(signals)
    cmd = [
        "bash",
        str(ROOT / "bench.sh"),
        "--python",
        str(python),
        "--log-dir",
        str(tmp_path / "runs"),
        "--experiments",
        "exp1",
        "--frameworks",
        "linen",
        "--envs",
        "CartPole-v1",
        "--sizes",
        "small",
        "--seeds",
        "2",
        "--no-env-timing",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # its own process group, which the stand-in signals
        start_new_session=True,
    )
    try:
        if count_signals:
            wait_until(lambda: signals.exists() and "started" in signals.read_text(), what="a run")
            # a terminal's Ctrl-C: SIGINT to its foreground process group, bench.sh's
            os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    runs = marks.read_text().splitlines() if marks.exists() else []
    return proc.returncode, out + err, runs


def test_ctrl_c_while_planning_starts_no_run(tmp_path):
    rc, out, runs = interrupted_sweep(tmp_path, interrupt_plan=True)
    assert rc == 130, out
    assert runs == [] and not (tmp_path / "runs" / "logs").exists()
    assert "run the same command again to resume" in out


@pytest.mark.parametrize(
    "exit_on_term,words,counts",
    [(130, "interrupted", "0 completed"), (0, "completed", "1 completed")],
)
def test_ctrl_c_during_a_run_starts_no_other_run(tmp_path, exit_on_term, words, counts):
    rc, out, runs = interrupted_sweep(tmp_path, interrupt_plan=False, exit_on_term=exit_on_term)
    assert rc == 130, out
    assert len(runs) == 1 and "--seed 1 " in runs[0]  # seed 2 never started
    # the run's own exit
    assert re.search(rf"\[1/2\] exp1 CartPole-v1 linen small jit seed 1 \.\.\. {words} in ", out), (
        out
    )
    assert f"{counts}, 0 failed, 0 skipped" in out


def test_a_ctrl_c_reaches_the_run_once(tmp_path):
    # the run gets bench.sh's SIGTERM alone: a SIGINT as well was its second signal, "stop at once"
    rc, out, runs = interrupted_sweep(tmp_path, interrupt_plan=False, count_signals=True)
    assert rc == 130, out
    assert len(runs) == 1
    assert (tmp_path / "signals").read_text().split() == ["started", "SIGTERM"], out


# ---------------------------------------------------------------------------------------- failures
BROKEN_SCRIPT = (
    "import sys\nprint('broken script ran with', sys.argv[1:], file=sys.stderr)\nsys.exit(3)\n"
)


def test_a_failed_run_is_reported_and_the_sweep_goes_on(tmp_path):
    script = tmp_path / "ppo_broken.py"
    script.write_text(BROKEN_SCRIPT)
    env = other_study(
        tmp_path, f'[frameworks.broken]\nscript = "{script.name}"\ncompile = ["jit"]\n'
    )
    log_dir = tmp_path / "runs"
    proc = bench(
        "--log-dir",
        str(log_dir),
        "--experiments",
        "exp1",
        "--frameworks",
        "broken",
        "--envs",
        "CartPole-v1",
        "--sizes",
        "small",
        "--seeds",
        "2",
        "--no-env-timing",
        env=env,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert last_line(proc) == "0 completed, 2 failed, 0 skipped"
    assert re.search(
        r"^\[1/2\] exp1 CartPole-v1 broken small jit seed 1 \.\.\. failed \(exit 3\)",
        proc.stdout,
        re.M,
    )
    assert re.search(
        r"^\[2/2\] exp1 CartPole-v1 broken small jit seed 2 \.\.\. failed \(exit 3\)",
        proc.stdout,
        re.M,
    )
    log = re.search(r"log: (\S+__1__\d+\.log)", proc.stdout)[1]
    assert (
        Path(log).parent == log_dir / "logs" / "exp1"
        and "broken script ran with" in Path(log).read_text()
    )


# ------------------------------------------------------------------------------------------ sweeps
def mini_sweep(log_dir: Path, *args: str, run_args=()) -> subprocess.CompletedProcess:
    return bench(
        "--log-dir",
        str(log_dir),
        "--experiments",
        "exp1",
        "--sizes",
        "small",
        "--seeds",
        "1",
        "--iterations",
        "2",
        "--no-env-timing",
        *args,
        *TINY,
        *run_args,
        timeout=1800,
    )


# a --tag (free text: a W&B project name has rules, refused before the run) that is a name (no path
# separators, which --tag refuses), with every word a shell would act on
HOSTILE_TAG = ["--tag", "x\ntodo\td\ts\t$(touch pwned) `touch pwned` 'q' \"d\" ;"]


@pytest.mark.slow
def test_mini_sweep_completes_then_skips_every_run(tmp_path):
    """linen on a bsuite env: one real run through bench.sh with --cpus 1, --iterations and run
    arguments (a hostile --tag among them, which the run's config.json holds as given, and no shell
    acts on), then skipped when asked again. Every script's real run through bench.sh (--cpus 1,
    then skipped when asked again) is the smoke sweep's, test_smoke.py's
    test_the_smoke_sweep_and_its_analysis_show_data_in_every_panel; the sweep's loops over envs and
    frameworks are the fake framework's tests."""
    log_dir = tmp_path / "runs"
    first = mini_sweep(log_dir, *MEMORY_CHAIN_LINEN, "--cpus", "1", run_args=HOSTILE_TAG)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert last_line(first) == "1 completed, 0 failed, 0 skipped"
    assert "every run on cores 0 with 1 threads" in first.stdout
    assert len(re.findall(r"^\[1/1\] .* completed in .* \| ETA ", first.stdout, re.M)) == 1
    (path,) = (log_dir / "exp1").glob("*/summary.json")
    assert read_json(path)["status"] == "completed" and read_json(path)["iterations_completed"] == 2
    config = read_json(path.parent / "config.json")
    assert config["sync_timing"] is False and config["exp_name"] == "exp1"
    assert config["env"] == "MemoryChain-bsuite" and config["num_envs"] == 4
    assert config["cpu_affinity"] == [0], config["cpu_affinity"]  # --cpus 1
    assert config["command"][-1] == HOSTILE_TAG[1] and config["tag"] == HOSTILE_TAG[1]
    assert not (ROOT / "pwned").exists() and not (tmp_path / "pwned").exists()
    assert len(list((log_dir / "logs" / "exp1").glob("*.log"))) == 1
    assert not (log_dir / "env_timing.json").exists()  # --no-env-timing

    # the same selection again: its run is skipped
    again = mini_sweep(log_dir, *MEMORY_CHAIN_LINEN, run_args=HOSTILE_TAG)
    assert again.returncode == 0, again.stderr
    assert last_line(again) == "0 completed, 0 failed, 1 skipped"


# -------------------------------------------------------------------------------------- env timing


def test_env_timing_check_wants_this_machine(tmp_path):
    import jax

    device, host = jax.devices()[0].device_kind, socket.gethostname()
    path = tmp_path / "env_timing.json"
    reason, envs = sweep_env_timing.env_timing_reason(path, ["CartPole-v1"])
    assert "missing" in reason and envs == ["CartPole-v1"]
    reason, envs = sweep_env_timing.env_timing_reason(
        timing_file(path, "elsewhere", device), ["CartPole-v1"]
    )
    assert "'elsewhere'" in reason and host in reason and envs == ["CartPole-v1"]
    reason, _ = sweep_env_timing.env_timing_reason(
        timing_file(path, host, "TPU v9"), ["CartPole-v1"]
    )
    assert "'TPU v9'" in reason and device in reason
    assert (
        sweep_env_timing.env_timing_reason(timing_file(path, host, device), ["CartPole-v1"]) is None
    )
    reason, envs = sweep_env_timing.env_timing_reason(
        timing_file(path, host, device), ["Acrobot-v1"]
    )
    # keeps what it had
    assert "lacks Acrobot-v1" in reason and envs == ["CartPole-v1", "Acrobot-v1"]


@pytest.mark.slow
def test_bench_re_times_envs_from_another_host_into_its_log_dir(tmp_path):
    log_dir = tmp_path / "runs"
    log_dir.mkdir()
    timing = timing_file(log_dir / "env_timing.json", "elsewhere", "cpu")
    committed = (ROOT / "results" / "env_timing.json").read_bytes()
    args = (*one_cell(),)
    (command,) = planned(log_dir, "exp1", "CartPole-v1")
    # the one run is done: only the env timing runs
    fake_run(log_dir, "exp1", "completed", command, "done")
    proc = bench("--log-dir", str(log_dir), *args, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(
        r"^measuring the env step costs first: .* comes from host 'elsewhere'", proc.stdout, re.M
    )
    data = read_json(timing)
    assert data["hostname"] == socket.gethostname() and list(data["envs"]) == ["CartPole-v1"]
    assert (ROOT / "results" / "env_timing.json").read_bytes() == committed
    assert last_line(proc) == "0 completed, 0 failed, 1 skipped"


@pytest.mark.parametrize("timing_file", [None, "elsewhere/timing.json"])
def test_bench_measures_the_env_timing_into_the_log_dir_never_the_committed_file(
    tmp_path, timing_file
):
    """The env timing of a sweep goes to {log-dir}/env_timing.json, or to --env-timing-file: never
    to the committed results/env_timing.json (sweep/env_timing.py's own default --out)."""
    python = tmp_path / "python"
    python.write_text(NOTING_PYTHON)
    python.chmod(0o755)
    marks, log_dir = tmp_path / "marks", tmp_path / "runs"
    env = {"MARKS": str(marks), "REAL_PYTHON": sys.executable}
    given = ["--env-timing-file", str(tmp_path / timing_file)] if timing_file else []
    proc = bench("--log-dir", str(log_dir), *one_cell(), *given, env=env, python=str(python))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    timing = [line for line in marks.read_text().splitlines() if "-m sweep.env_timing " in line]
    wanted = tmp_path / timing_file if timing_file else log_dir / "env_timing.json"
    assert len(timing) == 1 and timing[0].endswith(f" --out={wanted}"), timing


def test_env_timing_defaults_to_the_study_envs(tmp_path):
    env = {**os.environ, **other_study(tmp_path, "")}
    path = Path(env["BENCHBACK_STUDY"])
    text = (
        path.read_text()
        .replace('"CartPole-v1", ', "")
        .replace('"CartPole-v1" = [490.04, 6.12], ', "")
        .replace('envs = ["CartPole-v1"]', 'envs = ["Acrobot-v1"]')
    )
    # a study without CartPole-v1 (exp9 and exp13 read against no published CartPole return either,
    # the agents-per-process experiments on Acrobot-v1)
    path.write_text(text)
    code = "from sweep import env_timing; print(','.join(env_timing.env_list(env_timing.Args())))"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # nor CartPole-v1@envpool
    without = [e for e in STUDY.every_env if study.split_label(e)[0] != "CartPole-v1"]
    assert proc.stdout.strip().split(",") == without  # with the expensive and the envpool envs


def test_env_timing_writes_json(tmp_path):
    out = tmp_path / "timing.json"
    cmd = [
        sys.executable,
        *ENV_TIMING_MODULE,
        "--envs",
        "CartPole-v1,MemoryChain-bsuite",
        "--num-envs",
        "64",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = read_json(out)
    assert (
        data["num_envs"] == 64
        and data["device"]
        and {"jax", "gymnax"} <= set(data["versions"])
        and data["date"]
    )
    assert "craftax" not in data["versions"]  # no Craftax env timed
    assert data["hostname"] == socket.gethostname()
    envs = data["envs"]
    assert list(envs) == ["CartPole-v1", "MemoryChain-bsuite"]
    assert (envs["CartPole-v1"]["obs_dim"], envs["CartPole-v1"]["num_actions"]) == (4, 2)
    assert sorted(r["ratio"] for r in envs.values())[0] == 1.0
    assert all(
        r["ratio"] >= 1.0 and r["ms_per_step"] > 0 and r["median_ms"] > 0 for r in envs.values()
    )
    assert all(
        r["num_envs"] == 64 and r["us_per_env_step"] == pytest.approx(r["ms_per_step"] * 1e3 / 64)
        for r in envs.values()
    )
    assert "CartPole-v1" in proc.stdout and "ratio" in proc.stdout  # the table


class BatchedAdapter:
    """A gymnax env behind env_adapters.py's batched contract (reset and step take a batch, one key
    per env; num_actions, continuous and action_bounds, no action_space), counting the traces of its
    step."""

    def __init__(self, env_id: str):
        import gymnax

        self.env, self.default_params = gymnax.make(env_id)
        self.num_actions = self.env.num_actions
        self.continuous, self.action_bounds = False, None
        self.traced = 0

    def reset(self, keys, params):
        import jax

        return jax.vmap(self.env.reset, in_axes=(0, None))(keys, params)

    def step(self, keys, states, actions, params):
        import jax

        self.traced += 1
        return jax.vmap(self.env.step, in_axes=(0, 0, 0, None))(keys, states, actions, params)


def test_env_timing_steps_an_adapted_env_with_its_batched_step(monkeypatch):
    """An expensive env that env_adapters.py adapts (a stand-in for Craftax) is stepped by its
    adapter's batched step, --expensive-num-envs at once; a gymnax env by the vmapped gymnax step.
    """
    import env_adapters
    from sweep import env_timing

    adapter = BatchedAdapter("CartPole-v1")
    expensive = STUDY.expensive_envs[0]
    monkeypatch.setattr(env_adapters, "adapted_envs", lambda: (expensive,))
    monkeypatch.setattr(env_adapters, "make", lambda env_id: (adapter, adapter.default_params))
    args = env_timing.Args(num_envs=64, expensive_num_envs=8, warmup_steps=2, timed_steps=3)
    result = env_timing.time_env(expensive, args)
    assert (
        adapter.traced == 1
        and result["num_envs"] == 8
        and result["obs_dim"] == 4
        and result["num_actions"] == 2
    )
    assert env_timing.time_env("CartPole-v1", args)["num_envs"] == 64 and adapter.traced == 1


def test_env_timing_checks_out_before_timing(tmp_path):
    """An --out that cannot be written is refused in one line, exit 2, before any env is timed."""
    for out in (tmp_path, "/proc/no/such/env_timing.json"):
        cmd = [
            sys.executable,
            *ENV_TIMING_MODULE,
            "--envs",
            "CartPole-v1",
            "--out",
            str(out),
        ]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "--out" in proc.stderr and str(out) in proc.stderr
        assert "timing" not in proc.stdout  # refused before the timing starts


def test_env_timing_uses_the_adapter_module_not_a_ppo_script():
    """A timing tool must not pull in a PPO script and its training packages (optax, tensorboardX);
    flax comes with gymnax."""
    code = (
        "import sys; from sweep import env_timing; "
        "print(sorted(m for m in ('ppo_linen', 'optax', 'tensorboardX') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_env_timing_ratio_is_per_env_step():
    import jax

    from sweep import env_timing

    results = {"cheap": {"us_per_env_step": 0.25}, "costly": {"us_per_env_step": 100.0}}
    env_timing.add_ratios(results)
    assert results["cheap"]["ratio"] == 1.0 and results["costly"]["ratio"] == 400.0
    on_cpu = jax.default_backend() == "cpu"
    assert env_timing.expensive_num_envs(env_timing.Args(num_envs=64)) == (
        env_timing.CPU_EXPENSIVE_NUM_ENVS if on_cpu else 64
    )
    assert env_timing.expensive_num_envs(env_timing.Args(num_envs=64, expensive_num_envs=4)) == 4


@pytest.mark.slow
def test_env_timing_times_craftax(tmp_path):
    """The real Craftax adapter of the PPO scripts, on the env-cost axis beside a gymnax env (a tiny
    batch)."""
    pytest.importorskip("craftax")
    out = tmp_path / "timing.json"
    env = "Craftax-Classic-Symbolic-v1"
    cmd = [
        sys.executable,
        *ENV_TIMING_MODULE,
        "--envs",
        f"CartPole-v1,{env}",
        "--num-envs",
        "64",
        "--expensive-num-envs",
        "8",
        "--warmup-steps",
        "2",
        "--timed-steps",
        "3",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = read_json(out)
    assert data["expensive_num_envs"] == 8 and "craftax" in data["versions"]
    craftax = data["envs"][env]
    assert craftax["num_envs"] == 8 and craftax["num_actions"] == 17 and craftax["ratio"] > 1.0
    assert data["envs"]["CartPole-v1"]["ratio"] == 1.0


def test_env_timing_bad_env_exits_2():
    cmd = [sys.executable, *ENV_TIMING_MODULE, "--envs", "CartPole-v1,Nope-v0"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert (
        len(proc.stderr.strip().splitlines()) == 1
        and "Nope-v0" in proc.stderr
        and "Acrobot-v1" in proc.stderr
    )
    assert all(env in proc.stderr for env in STUDY.expensive_envs)


# ---------------------------------------------------------------------------------------------- git
def test_gitignore_lists_no_committed_file():
    proc = subprocess.run(
        ["git", "ls-files", "--cached", "--ignored", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout: {proc.stderr.strip()}")
    assert proc.stdout.strip() == ""


def test_slurm_tasks_get_the_same_cores_option(tmp_path):
    """--cpus goes to every array task (each pins its runs on its own node)."""
    proc = bench(
        "--slurm",
        "--dry-run",
        "--cpus",
        "1",
        "--log-dir",
        str(tmp_path / "runs"),
        "--experiments",
        "exp1",
        "--envs",
        "CartPole-v1",
        "--sizes",
        "small",
        "--seeds",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    assert "--cpus 1" in proc.stdout and not (tmp_path / "runs").exists()

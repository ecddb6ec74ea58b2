"""Tests of the sweep's agents-per-process axis (issue 57): an experiment's `agents` in study.toml,
each a cell of its own; a run of N agents gets --num-agents N (none for N = 1) and the repeats of
one cell train disjoint agent seeds; a bad value is refused in one line; the resume tells a run of 4
agents from a run of 1. The scaling experiments are found in the study by their agents, never by a
hard-coded name."""

import shlex
from pathlib import Path

import pytest
from sweep_runs import bench, done_lines, dry_run, fake_run, linen_small_plan, option, planned

from helpers import STUDY, one_cell

# the study's experiments of several agents per process, without configs (timing experiments)
SCALING = [n for n, exp in STUDY.experiments.items() if len(exp.agents) > 1 and not exp.configs]


def agents_of(line: str) -> int:
    words = shlex.split(line)
    return int(words[words.index("--num-agents") + 1]) if "--num-agents" in words else 1


def test_the_study_has_a_scaling_experiment_with_one_agent_and_more():
    assert SCALING, "no experiment of several agents per process in study.toml"
    assert all(1 in STUDY.experiments[name].agents for name in SCALING)


@pytest.mark.parametrize("exp", SCALING)
def test_a_dry_run_names_num_agents_above_one_only(tmp_path, exp):
    lines = dry_run(tmp_path, *one_cell(exp, STUDY.experiments[exp].envs[0]))
    # one run per number of agents, in the study's order: each a cell of its own
    assert [agents_of(line) for line in lines] == list(STUDY.experiments[exp].agents)
    for line in lines:
        words = shlex.split(line)
        if agents_of(line) == 1:  # the scripts' default: no flag, as float32 names no --dtype
            assert not any(word.startswith("--num-agents") for word in words), line
        else:
            assert words.count("--num-agents") == 1, line


@pytest.mark.parametrize("exp", SCALING)
def test_the_repeats_of_a_cell_train_disjoint_agent_seeds(tmp_path, exp):
    seeds = 3
    cell = one_cell(exp, STUDY.experiments[exp].envs[0])
    cell[cell.index("--seeds") + 1] = str(seeds)
    by_agents: dict[int, list[int]] = {}
    for line in dry_run(tmp_path, *cell):
        by_agents.setdefault(agents_of(line), []).append(int(option(line, "--seed")))
    assert sorted(by_agents) == sorted(STUDY.experiments[exp].agents)
    for agents, firsts in by_agents.items():
        trained = [seed for first in firsts for seed in range(first, first + agents)]
        # every agent seed once: 1 .. seeds x agents
        assert sorted(trained) == list(range(1, seeds * agents + 1)), (agents, firsts)


@pytest.mark.parametrize("exp", SCALING)
def test_the_plan_names_the_agents_of_a_run_in_its_description_and_log_name(tmp_path, exp):
    """A run of N > 1 agents says so, and its seeds, in its description and log name (a run of one
    agent, as before, does not): no two runs of an experiment share a log name."""
    rows = linen_small_plan(tmp_path, exp)
    assert len({row[2] for row in rows}) == len(rows) == len(STUDY.experiments[exp].agents)
    for row in rows:
        agents = agents_of(shlex.join(row[3:]))
        said = f"{agents} agents, seeds 1-{agents}" if agents > 1 else "seed 1"
        assert row[1].endswith(f" {said}") and ("__agents" in row[2]) == (agents > 1), row[:3]


def bad_study(tmp_path: Path, value: str) -> Path:
    """study.toml with the first scaling experiment's agents set to `value` (TOML)."""
    text = (Path(STUDY.path)).read_text()
    name = SCALING[0]
    head, table, rest = text.partition(f"[experiments.{name}]\n")
    line = next(line for line in rest.splitlines() if line.startswith("agents ="))
    path = tmp_path / "study.toml"
    path.write_text(head + table + rest.replace(line, f"agents = {value}", 1))
    return path


@pytest.mark.parametrize("value, shown", [("[1, 0]", "0"), ('["x"]', "'x'"), ("[1.5]", "1.5")])
def test_a_bad_agents_value_is_refused_in_one_line_naming_it(tmp_path, value, shown):
    path = bad_study(tmp_path, value)
    log_dir = tmp_path / "runs"
    proc = bench("--dry-run", "--log-dir", str(log_dir), env={"BENCHBACK_STUDY": str(path)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    message = lines[0].split(str(path), 1)[1]  # the path aside (it holds digits)
    assert f"{SCALING[0]}'s agents" in message and shown in message.split(";")[0], message
    assert "positive integers" in message
    assert not log_dir.exists()


def test_num_agents_after_the_double_dash_is_refused(tmp_path):
    exp = SCALING[0]
    proc = bench(
        "--dry-run",
        "--log-dir",
        str(tmp_path / "runs"),
        *one_cell(exp, STUDY.experiments[exp].envs[0]),
        "--",
        "--num_agents=8",
    )
    assert proc.returncode == 2 and "each experiment's agents" in proc.stderr, proc.stderr


def test_a_run_of_4_agents_done_does_not_mark_the_run_of_1_done(tmp_path):
    exp = next(name for name in SCALING if 4 in STUDY.experiments[name].agents)
    env, log_dir = STUDY.experiments[exp].envs[0], tmp_path / "runs"
    commands = {agents_of(shlex.join(cmd)): cmd for cmd in planned(log_dir, exp, env)}
    # the first repeat of 1 agent and of 4 share --seed 1: only --num-agents tells them apart
    assert option(shlex.join(commands[1]), "--seed") == option(shlex.join(commands[4]), "--seed")
    fake_run(log_dir, exp, "completed", commands[4], "four")
    (done,) = done_lines(log_dir, exp=exp, env=env)
    assert agents_of(done.removeprefix("# done: ")) == 4
    fake_run(log_dir, exp, "completed", commands[1], "one")
    done = [
        agents_of(line.removeprefix("# done: ")) for line in done_lines(log_dir, exp=exp, env=env)
    ]
    assert sorted(done) == [1, 4]


def test_an_experiment_gives_args_or_configs_not_both(tmp_path):
    text = Path(STUDY.path).read_text()
    name = next(n for n, exp in STUDY.experiments.items() if exp.configs)
    table = f"[experiments.{name}]\n"
    path = tmp_path / "study.toml"
    path.write_text(text.replace(table, f'{table}args = ["--num-envs", "8"]\n', 1))
    proc = bench(
        "--dry-run", "--log-dir", str(tmp_path / "runs"), env={"BENCHBACK_STUDY": str(path)}
    )
    assert proc.returncode == 2 and "has args and configs" in proc.stderr, proc.stderr

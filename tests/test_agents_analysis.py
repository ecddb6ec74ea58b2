"""The analysis of runs of several agents per process (issue 57, --num-agents N): each agent a seed
of its cell in the learning analysis, the timing one row per process, peak memory per agent, the
scaling table and figure, and the interquartile mean with its stratified-bootstrap interval. Run
folders are made here as the contract (config.json num_agents, summary.json final_returns,
agent_{k}/ events) says the scripts write them, so that every number is known."""

import json
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tensorboardX import SummaryWriter

from analysis import learning_curves, loading, results, stats
from core import runlog, study
from core.events import RETURN

ENV = "CartPole-v1"
NUM_ENVS, NUM_STEPS, ITERATIONS = 4, 8, 12
BATCH = NUM_ENVS * NUM_STEPS
ARGS = ["--num-envs", str(NUM_ENVS), "--num-steps", str(NUM_STEPS)]
ARGS += ["--num-iterations", str(ITERATIONS)]
MIB = 1 << 20
# a learning experiment of one and of four agents per process, and a timing one of 1, 4 and 16
STUDY_TOML = f"""
[experiments.agents9]
title = "learning with agents as seeds"
reference = "a made-up reference"
sizes = ["small"]
compile = "default"
sync = false
agents = [1, 4]
figures = ["learning"]

[experiments.agents9.configs.ppo]
title = "12 iterations of 4 envs x 8 steps"
args = {json.dumps(ARGS)}
returns = {{ "{ENV}" = [100.0, 10.0] }}

[experiments.scale]
title = "agents per process"
envs = ["{ENV}"]
sizes = ["small"]
compile = "default"
sync = true
agents = [1, 4, 16]
args = {json.dumps(ARGS)}
figures = ["agents"]
"""
START = datetime(2025, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def agents_study(tmp_path, monkeypatch):
    """The study with STUDY_TOML's experiments (through $BENCHBACK_STUDY)."""
    path = tmp_path / "study.toml"
    path.write_text((Path(study.DEFAULT_PATH)).read_text() + "\n" + STUDY_TOML)
    monkeypatch.setenv(study.PATH_VARIABLE, str(path))
    return study.load()


def agent_returns(k: int) -> list:
    """Agent k's return per iteration: 10 (k + 1) x the iteration, none in every third one."""
    return [None if i % 3 == 0 else 10.0 * (k + 1) * i for i in range(ITERATIONS)]


def final_of(returns: list):
    """The mean of the last 10 iterations' returns, as bookkeeping.py makes final_return."""
    last = [r for r in returns[-10:] if r is not None]
    return statistics.mean(last) if last else None


def write_events(folder: Path, start: float, seconds: float, scalars: dict) -> None:
    """An events file in folder: scalars, tag -> a value per iteration (None: not logged), the
    iterations seconds apart after 1 s of setup."""
    writer = SummaryWriter(str(folder))
    for tag, values in scalars.items():
        for i, value in enumerate(values):
            if value is not None:
                writer.add_scalar(
                    tag, value, (i + 1) * BATCH, walltime=start + 1.0 + seconds * (i + 1)
                )
    writer.close()


def write_agents_run(
    root: Path,
    framework: str,
    seed: int,
    agents: int,
    hour: int,
    seconds: float = 0.1,
    sync: bool = False,
    memory: bool = True,
    legacy: bool = False,
    size: str = "small",
    host_s: float = 0.0,
    folders: bool = False,
    silent: tuple = (),
    untagged: bool = False,
) -> Path:
    """A run folder of `agents` agents as ppo_{framework}.py writes it (its agent k's returns:
    agent_returns(k)), seconds per iteration (time/iteration) and host_s more between iterations
    (time/elapsed's steps: seconds + host_s), started `hour` hours after START. memory: with
    summary.json's peak_rss_bytes (100 MiB + 50 MiB an agent) and peak_device_bytes (null); legacy:
    a run of before --num-agents (no num_agents, no final_returns); size: its model size; folders:
    agent k's events in its agent_k/ folder, as the scripts wrote them before one event held every
    agent's scalars (agent_k/ tags in the run's events); silent: agents none of whose episodes
    ended (no return, ever); untagged: the silent agents log no tag at all, not even a loss."""
    mode = study.load().frameworks[framework].default_compile
    started = START + timedelta(hours=hour)
    name = f"{ENV}__{framework}__{size}__{mode}__{seed}__{1_700_000_000 + hour}"
    run_dir = root / name
    run_dir.mkdir(parents=True)
    command = [f"ppo_{framework}.py", "--env", ENV, "--model-size", size]
    command += ["--seed", str(seed), *ARGS]
    command += ["--num-agents", str(agents)] if agents > 1 else []
    command += ["--sync-timing"] if sync else []
    config = dict(
        env=ENV,
        framework=framework,
        model_size=size,
        compile=mode,
        seed=seed,
        sync_timing=sync,
        tag="default",
        num_envs=NUM_ENVS,
        num_steps=NUM_STEPS,
        batch_size=BATCH,
        num_iterations=ITERATIONS,
        hostname="host",
        device_name="cpu",
        start_time=started.isoformat(),
        command=command,
    )
    if not legacy:
        config["num_agents"] = agents
    (run_dir / "config.json").write_text(json.dumps(config))
    returns = [[None] * ITERATIONS if k in silent else agent_returns(k) for k in range(agents)]
    finals = [final_of(r) for r in returns]
    ended = [[r[i] for r in returns if r[i] is not None] for i in range(ITERATIONS)]
    start = started.timestamp()
    scalars = {
        "time/iteration": [seconds] * ITERATIONS,
        "time/elapsed": [1.0 + (seconds + host_s) * (i + 1) for i in range(ITERATIONS)],
        "time/rollout": [seconds / 2] * ITERATIONS,
        "time/update": [seconds / 2] * ITERATIONS,
        "charts/SPS": [agents * BATCH / seconds] * ITERATIONS,
        RETURN: [statistics.mean(e) if e else None for e in ended],
    }
    for k in range(agents if agents > 1 and not folders else 0):
        if k in silent and untagged:
            continue
        scalars[f"agent_{k}/{RETURN}"] = returns[k]
        scalars[f"agent_{k}/losses/value_loss"] = [1.0 / (k + 1)] * ITERATIONS
    write_events(run_dir, start, seconds, scalars)
    (events,) = run_dir.glob("events.out.tfevents.*")
    events.rename(run_dir / f"events.out.tfevents.{int(start)}.host")
    for k in range(agents if agents > 1 and folders else 0):
        write_events(run_dir / f"agent_{k}", start, seconds, {RETURN: returns[k]})
    known = [f for f in finals if f is not None]
    summary = dict(
        status="completed",
        iterations_completed=ITERATIONS,
        setup_s=1.0,
        import_s=0.5,
        total_s=1.0 + seconds * ITERATIONS + 0.5,
        final_return=statistics.mean(known) if known else None,
    )
    if not legacy:
        summary["final_returns"] = finals
    if memory:
        summary.update(peak_rss_bytes=(100 + 50 * agents) * MIB, peak_device_bytes=None)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def analysed(roots: list, the_study) -> results.Results:
    runs, skipped = loading.load_runs([str(r) for r in roots], [], the_study)
    assert not skipped, skipped
    return results.analyse(runs, loading.read_env_timing(None)[0], the_study)


# ---------------------------------------------------------------------------- reading and checking


@pytest.mark.parametrize("folders", [False, True], ids=["agent tags", "agent folders"])
def test_a_run_of_four_agents_is_read_with_each_agents_return(tmp_path, agents_study, folders):
    run_dir = write_agents_run(tmp_path, "linen", 1, 4, 0, folders=folders)
    run = runlog.read_completed_run(run_dir, agents_study)
    for k in range(4):
        logged = run.scalars[f"agent_{k}/{RETURN}"].tolist()
        assert [None if np.isnan(v) else v for v in logged] == agent_returns(k)
    # of an agent's own scalars, its return alone: its losses would be columns of every runs.csv
    assert [tag for tag in run.scalars if tag.startswith("agent_")] == [
        f"agent_{k}/{RETURN}" for k in range(4)
    ]


def test_an_agent_none_of_whose_episodes_ended_has_a_return_of_nan(tmp_path, agents_study):
    """Agent 2 logged its losses under agent_2/ and never a return: its return's column is NaN
    throughout, and summary.json's null for it is its final return."""
    run_dir = write_agents_run(tmp_path, "linen", 1, 4, 0, silent=(2,))
    run = runlog.read_completed_run(run_dir, agents_study)
    assert run.scalars[f"agent_2/{RETURN}"].isna().all()
    assert run.summary["final_returns"][2] is None


def test_a_run_of_four_agents_without_an_agents_tags_is_refused(tmp_path, agents_study):
    run_dir = write_agents_run(tmp_path, "linen", 1, 4, 0, silent=(3,), untagged=True)
    with pytest.raises(runlog.RunError, match="agent_3/"):
        runlog.read_completed_run(run_dir, agents_study)


def other_agent_2(finals: list) -> list:
    return [*finals[:2], finals[2] + 1.0, *finals[3:]]


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda s: s.update(final_returns=s["final_returns"][:3]), "not a list of 4 returns"),
        (lambda s: s.update(final_returns=other_agent_2(s["final_returns"])), "final_returns.2"),
        (lambda s: s["final_returns"].__setitem__(1, "x"), "a return is not a number"),
        (lambda s: s.update(final_return=s["final_return"] + 1), "not its agents' mean"),
    ],
)
def test_final_returns_that_are_not_the_agents_are_refused(tmp_path, agents_study, change, reason):
    run_dir = write_agents_run(tmp_path, "linen", 1, 4, 0)
    summary = json.loads((run_dir / "summary.json").read_text())
    change(summary)
    if reason == "final_returns.2":  # agent 2's return changed: final_return their mean again
        summary["final_return"] = statistics.mean(summary["final_returns"])
    (run_dir / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(runlog.RunError, match=reason):
        runlog.read_completed_run(run_dir, agents_study)


def test_a_run_of_four_agents_without_an_agents_events_is_refused(tmp_path, agents_study):
    run_dir = write_agents_run(tmp_path, "linen", 1, 4, 0, folders=True)
    for path in (run_dir / "agent_3").iterdir():
        path.unlink()
    with pytest.raises(runlog.RunError, match="agent_3/"):
        runlog.read_completed_run(run_dir, agents_study)


def test_a_run_of_before_num_agents_is_one_agent(tmp_path, agents_study):
    """No num_agents, no final_returns, no peak memory: one agent, [final_return], no memory."""
    write_agents_run(tmp_path / "scale", "linen", 1, 1, 0, legacy=True, memory=False)
    summary = analysed([tmp_path], agents_study).summary
    assert summary["num_agents"].tolist() == [1]
    assert json.loads(summary["final_returns"].iloc[0]) == [final_of(agent_returns(0))]
    assert summary["peak_rss_per_agent"].isna().all()


# ----------------------------------------------------------------------------- agents as seeds


def test_learning_counts_each_agent_as_a_seed_and_timing_each_process_once(tmp_path, agents_study):
    """A 4-agent run per framework (seed 1: agent seeds 1-4) in the learning experiment's folder:
    the learning table counts 4 seeds each, their final returns final_returns[k], their curves
    agent k's; the summary (the timing) holds one row per process."""
    for hour, framework in enumerate(["linen", "torch"]):
        write_agents_run(tmp_path / "agents9", framework, 1, 4, hour)
    analysis = analysed([tmp_path], agents_study)
    assert len(analysis.summary) == 2  # one row per process
    learned = analysis.learning_runs
    assert sorted(learned.loc[learned["framework"] == "linen", "seed"]) == [1, 2, 3, 4]
    finals = [final_of(agent_returns(k)) for k in range(4)]
    linen = learned[learned["framework"] == "linen"].sort_values("seed")
    assert linen["final_return"].tolist() == pytest.approx(finals)
    table = analysis.learning.set_index("framework")
    assert table.loc["linen", "n_runs"] == 4 and table.loc["linen", "num_agents"] == 4
    assert table.loc["linen", "final_mean"] == pytest.approx(statistics.mean(finals))
    assert table.loc["linen", "final_iqm"] == pytest.approx(stats.iqm(finals))
    curves = analysis.learning_curves
    last = curves[curves["framework"] == "linen"].groupby("seed")["smoothed"].last()
    assert last.tolist() == pytest.approx(finals)  # each agent's own curve


def test_runs_of_one_and_of_four_agents_are_other_cells(tmp_path, agents_study):
    """A 1-agent run and a 4-agent run of one framework: two rows of the learning table."""
    write_agents_run(tmp_path / "agents9", "linen", 1, 1, 0)
    write_agents_run(tmp_path / "agents9", "linen", 1, 4, 1)
    table = analysed([tmp_path], agents_study).learning
    assert sorted(zip(table["num_agents"], table["n_runs"])) == [(1, 1), (4, 4)]


def test_the_timing_pairs_only_runs_of_as_many_agents(tmp_path, agents_study):
    """Speedups pair a 4-agent linen run with the 4-agent torch run, never with a 1-agent one."""
    write_agents_run(tmp_path / "scale", "linen", 1, 4, 0, seconds=0.1, sync=True)
    write_agents_run(tmp_path / "scale", "torch", 1, 4, 1, seconds=0.3, sync=True)
    write_agents_run(tmp_path / "scale", "torch", 1, 1, 2, seconds=0.05, sync=True)
    pairs = analysed([tmp_path], agents_study).pairs["rollout"]
    pair = pairs[pairs["pair"] == "torch->linen"]
    assert len(pair) == 1 and pair["value"].iloc[0] == pytest.approx(3.0)


def test_the_learning_curves_tool_draws_each_agent(tmp_path, agents_study):
    run_dir = write_agents_run(tmp_path, "linen", 7, 4, 0)
    runs = [runlog.read_completed_run(run_dir, agents_study)]
    assert sorted(seed for _, seed, _, _ in learning_curves.curves(runs)[ENV]) == [7, 8, 9, 10]
    table = learning_curves.final_returns(runs)
    for k in range(4):
        assert f"| {ENV} | linen | {7 + k} | {BATCH * ITERATIONS:,} | " in table


def test_the_runs_csv_keeps_the_agents(tmp_path, agents_study):
    """A runs.csv written from a 4-agent run gives the same learning table read back with --csv."""
    write_agents_run(tmp_path / "runs" / "agents9", "linen", 1, 4, 0)
    runs, _ = loading.load_runs([str(tmp_path / "runs")], [], agents_study)
    from analysis.common import write_csv

    write_csv(runs, tmp_path / "runs.csv")
    again, skipped = loading.load_runs([], [str(tmp_path / "runs.csv")], agents_study)
    assert not skipped
    timing = loading.read_env_timing(None)[0]
    tables = [results.analyse(r, timing, agents_study).learning for r in (runs, again)]
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert tables[1]["n_runs"].tolist() == [4]


# ------------------------------------------------------------------------- the interquartile mean


def test_the_iqm_of_eight_values_is_the_mean_of_the_middle_four():
    """8 values: a quarter (2) cut from each end, the mean of the 4 left, whatever their order."""
    assert stats.iqm([100.0, 1.0, 6.0, 3.0, -50.0, 5.0, 4.0, 2.0]) == (2 + 3 + 4 + 5) / 4
    assert stats.iqm([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1000.0]) == (3 + 4 + 5 + 6) / 4


def test_the_iqm_interval_is_a_seeded_bootstrap_within_each_stratum():
    """Constant strata give a point interval at their IQM; the interval holds the IQM of the values,
    is the same on every call, and is none below 3 values."""
    assert stats.iqm_interval([[2.0] * 5, [4.0] * 5]) == (3.0, 3.0)
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0]
    low, high = stats.iqm_interval([values])
    assert low < stats.iqm(values) < high < 100.0
    assert stats.iqm_interval([values]) == (low, high)
    assert all(np.isnan(stats.iqm_interval([[1.0, 2.0]])))


def test_the_learning_table_gives_the_iqm_and_its_interval_beside_the_mean(tmp_path, agents_study):
    """One run of 4 agents: the table's IQM is that of the 4 final returns (the middle two), its
    interval the bootstrap's; REPORT.md's cell shows both after mean ± std (in bold: it meets the
    reference's 100 ± 10)."""
    from analysis.markdown import learning_markdown

    write_agents_run(tmp_path / "agents9", "linen", 1, 4, 0)
    analysis = analysed([tmp_path], agents_study)
    finals = sorted(final_of(agent_returns(k)) for k in range(4))
    row = analysis.learning.iloc[0]
    assert row["final_iqm"] == pytest.approx((finals[1] + finals[2]) / 2)
    assert (row["iqm_low"], row["iqm_high"]) == pytest.approx(stats.iqm_interval([finals]))
    text = learning_markdown(analysis)
    mean, std = statistics.mean(finals), statistics.stdev(finals)
    cell = f"**{mean:.1f} ± {std:.1f}**; IQM {row['final_iqm']:.1f} [{row['iqm_low']:.1f}, "
    assert cell in text


# ------------------------------------------------------------------------ memory and the scaling


def test_memory_is_reported_per_cell_and_per_agent(tmp_path, agents_study):
    """A 4-agent run's 300 MiB of peak RSS is 75 MiB an agent (peak / N), in the summary and in
    REPORT.md's peak memory table; a 1-agent run's 150 MiB is its own."""
    from analysis.markdown import report_sections

    write_agents_run(tmp_path / "scale", "linen", 1, 4, 0, sync=True)
    write_agents_run(tmp_path / "scale", "linen", 1, 1, 1, sync=True)
    analysis = analysed([tmp_path], agents_study)
    per_agent = analysis.summary.set_index("num_agents")["peak_rss_per_agent"]
    assert per_agent[4] == 300 * MIB / 4 and per_agent[1] == 150 * MIB
    text = "\n\n".join(report_sections(analysis))
    memory = text.split("## Peak memory")[1]
    assert "300 MiB (75 MiB/agent)" in memory and "| 150 MiB " in memory
    assert "record no peak memory" not in memory


def test_runs_without_memory_have_none_and_say_so(tmp_path, agents_study):
    """Runs of earlier editions (no peak_rss_bytes): no memory figure, one line, no failure."""
    from analysis.markdown import report_sections

    write_agents_run(tmp_path / "scale", "linen", 1, 1, 0, sync=True, memory=False)
    write_agents_run(tmp_path / "scale", "torch", 1, 1, 1, sync=True, memory=False, legacy=True)
    text = "\n\n".join(report_sections(analysed([tmp_path], agents_study)))
    memory = text.split("## Peak memory")[1]
    assert "_2 runs (of earlier editions) record no peak memory._" in memory
    assert "MiB" not in memory


def scaling_runs(root: Path) -> dict:
    """linen at 0.1 s and torch at 0.4 s an iteration, 1, 4 and 16 agents per process (torch 16:
    1.6 s), each with 0.01 s of host work per agent between iterations: their agent-steps per
    second in the timed iterations and over whole iterations, N x BATCH / seconds and
    N x BATCH / (seconds + host)."""
    seconds = {("linen", n): 0.1 for n in (1, 4, 16)}
    seconds.update({("torch", 1): 0.4, ("torch", 4): 0.4, ("torch", 16): 1.6})
    for hour, ((framework, n), s) in enumerate(seconds.items()):
        write_agents_run(
            root / "scale", framework, 1, n, hour, seconds=s, sync=True, host_s=0.01 * n
        )
    return {
        key: (key[1] * BATCH / s, key[1] * BATCH / (s + 0.01 * key[1]))
        for key, s in seconds.items()
    }


def test_the_scaling_table_gives_agent_steps_and_memory_per_agent_against_n(tmp_path, agents_study):
    """A row per framework, a column per N (in order): agent-steps per second in the steady window
    and peak memory per agent, each run's own."""
    from analysis.markdown import report_sections

    expected = scaling_runs(tmp_path)
    text = "\n\n".join(report_sections(analysed([tmp_path], agents_study)))
    table = text.split("## Agents per process (scale)")[1].split("##")[0]
    assert "| framework | size | 1 agent | 4 agents | 16 agents |" in " ".join(table.split())
    for (framework, n), (rate, whole) in expected.items():
        memory = (100 + 50 * n) / n
        cell = f"{rate:,.0f}/s ({whole:,.0f}/s whole); {memory:,.0f} MiB/agent"
        assert cell in table, (framework, n)
    linen = [line for line in table.splitlines() if line.startswith("| linen")]
    assert len(linen) == 1 and linen[0].index("1,280/s") < linen[0].index("5,120/s")


def test_the_scaling_table_never_pools_model_sizes(tmp_path, agents_study):
    """Runs of two model sizes in one experiment: a row per framework and size, each with its own
    rate (pooled, the median of a small and a medium run would be neither's)."""
    from analysis.markdown import report_sections

    seconds = {"small": 0.1, "medium": 0.4}
    for hour, (size, n) in enumerate([(size, n) for size in seconds for n in (1, 4)]):
        write_agents_run(
            tmp_path / "scale", "linen", 1, n, hour, seconds[size], sync=True, size=size
        )
    text = "\n\n".join(report_sections(analysed([tmp_path], agents_study)))
    table = text.split("## Agents per process (scale)")[1].split("##")[0]
    linen = [line.split("|") for line in table.splitlines() if line.startswith("| linen")]
    rows = {cells[2].strip(): "|".join(cells) for cells in linen}
    assert len(linen) == 2 and set(rows) == {"small", "medium"}
    for size, s in seconds.items():
        assert f"{4 * BATCH / s:,.0f}/s" in rows[size], size


def test_the_agents_figure_draws_each_framework_against_n(tmp_path, agents_study):
    """Two log-log panels, a line per framework through its N: agent-steps per second and MiB per
    agent; written as a PNG by plot_results for an experiment that lists "agents"."""
    import plot_results
    from analysis import figures

    expected = scaling_runs(tmp_path / "runs")
    fig = figures.agents_figure(analysed([tmp_path / "runs"], agents_study), "scale")
    steps, memory = fig.axes[:2]
    assert steps.get_xscale() == steps.get_yscale() == memory.get_yscale() == "log"
    for ax, value in ((steps, lambda f, n: expected[f, n][0]), (memory, lambda f, n: 50 + 100 / n)):
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert set(lines) == {"linen", "torch"}
        for framework, line in lines.items():
            assert list(line.get_xdata()) == [1, 4, 16]
            wanted = [value(framework, n) for n in (1, 4, 16)]
            assert list(line.get_ydata()) == pytest.approx(wanted)
    out = tmp_path / "out"
    plot_results.main([str(tmp_path / "runs"), "--out", str(out)])
    assert (out / "scale_agents.png").stat().st_size > 10_000
    assert "## Agents per process (scale)" in (out / "REPORT.md").read_text()


def test_an_experiment_with_args_holds_only_the_runs_of_its_folder(agents_study):
    """A sync-on CartPole-v1 small run of one agent in its default mode matches the scaling
    experiment's matrix, but not its args (its batch): it joins it only from bench.sh's folder, as
    a 4-agent run does; a 2-agent run (not one of its agents) never."""
    run = dict(
        env=ENV,
        model_size="small",
        framework="linen",
        compile="jit",
        sync_timing=True,
        dtype="float32",
        num_agents=1,
    )
    scale = agents_study.experiments["scale"]
    assert not loading.in_experiment({**run, "experiment_folder": ""}, scale, agents_study)
    assert loading.in_experiment({**run, "experiment_folder": "scale"}, scale, agents_study)
    assert loading.in_experiment(
        {**run, "experiment_folder": "scale", "num_agents": 4}, scale, agents_study
    )
    assert not loading.in_experiment(
        {**run, "experiment_folder": "scale", "num_agents": 2}, scale, agents_study
    )

"""What counts as a run, and how runs pair (issue 54, items 3-7, 9 and 14): the checks that keep
wrong or forged results out of the README's tables, for bench.sh's resume (sweep/resume.py) and the
analysis (plot_results.py) alike. The run folders are built as the scripts write them
(tests/analysis_runs.py's write_run)."""

import json
import math
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_runs import ENVS, analyse, csv_run, write_csv, write_run
from learning_runs import CONFIG_ARGS, EXP, made_up_runs, run_rows, summary_row

from analysis import learning, markdown, output
from core import events, runlog
from helpers import ROOT, STUDY
from sweep import resume as sweep_resume


def linen_run(root: Path, factor: float = 1.0, env: str = "CartPole-v1", seed: int = 1) -> Path:
    """One completed exp1 linen run folder (sync off), its durations times factor."""
    return write_run(root, env, "linen", "small", "jit", seed, sync=False, factor=factor)["run_dir"]


def edit(run_dir: Path, name: str, **changes) -> None:
    """config.json or summary.json of run_dir with some keys changed."""
    data = json.loads((run_dir / name).read_text())
    (run_dir / name).write_text(json.dumps({**data, **changes}))


def skipped_section(out: Path) -> str:
    return (out / "REPORT.md").read_text().split("## Skipped runs")[1]


# -------------------------------------------------- item 3: total_s bounded by what the events show
def test_a_total_longer_than_its_events_show_is_refused(tmp_path, capsys):
    """A run of about 47 s whose summary.json says ten times that: the events end 47 s after the
    start, so the run is no run, for the resume and the analysis (which would otherwise make linen
    ten times slower)."""
    linen_run(tmp_path / "runs", env="Acrobot-v1")
    run_dir = linen_run(tmp_path / "runs", factor=100.0)
    total = json.loads((run_dir / "summary.json").read_text())["total_s"]
    assert runlog.is_completed(run_dir)
    edit(run_dir, "summary.json", total_s=10 * total)
    with pytest.raises(runlog.RunError, match="longer than its events show"):
        runlog.read_completed_run(run_dir)
    out = tmp_path / "out"
    assert analyse(capsys, tmp_path / "runs", "--out", out, "--no-figures").code == 0
    assert len(pd.read_csv(out / "summary.csv")) == 1
    assert run_dir.name in skipped_section(out)


def test_a_total_as_long_as_its_events_show_is_kept(tmp_path):
    run_dir = linen_run(tmp_path / "runs", factor=100.0)
    total = json.loads((run_dir / "summary.json").read_text())["total_s"]
    edit(run_dir, "summary.json", total_s=total + events.TAIL_S / 2)  # a slow end: W&B's finish
    assert runlog.is_completed(run_dir)


def test_a_tracked_run_may_end_with_a_slow_upload(tmp_path):
    """W&B's finish uploads over the network: with --track, minutes after the last iteration are a
    run's end (a tracked run refused would be run again by every resume); without it, the same total
    is refused."""
    run_dir = linen_run(tmp_path / "runs", factor=100.0)
    total = json.loads((run_dir / "summary.json").read_text())["total_s"]
    edit(run_dir, "summary.json", total_s=total + 5 * 60)
    assert not runlog.is_completed(run_dir)
    with_command(run_dir, "--track")
    edit(run_dir, "config.json", track=True)
    assert runlog.is_completed(run_dir)


# -------------------------------------------------- item 4: config.json agrees with its own command
def with_command(run_dir: Path, *words: str) -> list[str]:
    """run_dir's config.json given the command bench.sh would have run for it, plus words; returns
    it."""
    config = json.loads((run_dir / "config.json").read_text())
    command = [
        str(ROOT / f"ppo_{config['framework']}.py"),
        "--env",
        config["env"],
        "--model-size",
        config["model_size"],
        "--compile",
        config["compile"],
        "--seed",
        str(config["seed"]),
        "--log-dir",
        str(run_dir.parent),
        "--exp-name",
        config["exp_name"],
        "--no-sync-timing",
        *words,
    ]
    edit(run_dir, "config.json", command=command)
    return command


@pytest.mark.parametrize(
    "change, field",
    [
        (("--seed", "2"), "seed"),
        (("--env", "Acrobot-v1"), "env"),
        (("--dtype", "bfloat16"), "dtype"),
        (("--env-backend", "envpool"), "env_backend"),
        (("--num-iterations", "20"), "num_iterations"),
        (("--sync-timing",), "sync_timing"),
        (("--tag", "mac"), "tag"),
    ],
)
def test_a_command_that_disagrees_with_its_fields_is_no_run(tmp_path, change, field):
    """The resume knows a run by its command, the analysis by its fields: a folder whose command
    gives another seed (env, dtype, ...) than its fields would be done for bench.sh as one run and
    counted as another."""
    run_dir = linen_run(tmp_path / "exp1")
    command = with_command(run_dir)
    assert runlog.is_completed(run_dir)
    # write_run's folder of the run's tag stands for bench.sh's of its experiment
    assert sweep_resume.completed_keys(run_dir.parent) == {sweep_resume.run_key(command)}
    command = with_command(run_dir, *change)  # the last value wins, as in the scripts' parser
    with pytest.raises(runlog.RunError, match=f"config.json {field} is"):
        runlog.read_completed_run(run_dir)
    assert sweep_resume.completed_keys(run_dir.parent) == set()


def test_a_command_of_another_script_than_its_framework_is_no_run(tmp_path):
    run_dir = linen_run(tmp_path / "exp1")
    command = with_command(run_dir)
    edit(run_dir, "config.json", command=[str(ROOT / "ppo_nnx.py"), *command[1:]])
    with pytest.raises(runlog.RunError, match="ppo_linen.py, the script of its framework linen"):
        runlog.read_completed_run(run_dir)


def test_a_relabelled_run_is_skipped_by_the_analysis(tmp_path, capsys):
    """The issue's forgery: a linen run relabelled nnx (its command still runs ppo_linen.py) is
    skipped with its reason, and there is no nnx -> linen speedup."""
    for env in ENVS[:3]:
        linen_run(tmp_path / "runs" / "real", env=env)
        forged = linen_run(tmp_path / "runs" / "forged", env=env)
        with_command(forged)
        edit(forged, "config.json", framework="nnx", compile=STUDY.default_compile("nnx"))
    out = tmp_path / "out"
    assert analyse(capsys, tmp_path / "runs", "--out", out, "--no-figures").code == 0
    assert pd.read_csv(out / "speedups.csv").empty
    assert skipped_section(out).count("but its command gives") == 0
    assert skipped_section(out).count("not ppo_nnx.py, the script of its framework nnx") == 3


# -------------------------------------------------------------- item 5: a copied folder counts once
def test_a_copied_run_folder_counts_once(tmp_path, capsys):
    """cp -a B B-2: the same command, host and start time are one run; the copy is listed as
    skipped."""
    runs = tmp_path / "runs"
    for env in ENVS[:3]:
        for framework in ("linen", "nnx"):
            write_run(runs, env, framework, "small", STUDY.default_compile(framework), 1, False)
    original = sorted(runs.rglob("config.json"))[0].parent
    copy = original.with_name(original.name + "-2")
    shutil.copytree(original, copy)
    assert runlog.is_completed(copy)  # a usable run: only its folder name is new
    out = tmp_path / "out"
    assert analyse(capsys, runs, "--out", out, "--no-figures").code == 0
    assert len(pd.read_csv(out / "summary.csv")) == 6
    assert set(pd.read_csv(out / "speedups.csv")["n_pairs"]) == {3}  # 3 envs, a pair each
    skipped = skipped_section(out)
    assert copy.name in skipped and f"a copy of {original}" in skipped


# --------------------------------------------------------- item 6: pairs within one host and device
def test_runs_of_two_machines_are_never_paired(tmp_path, capsys):
    """exp1's seed 1 on one machine and seed 2 on another (bench.sh --shard 0/2 and 1/2): each pair
    is of one machine, 2 pairs per env (not 4), and REPORT.md says that the cell holds runs of two
    machines."""
    runs = []
    for env, framework in [(env, fw) for env in ENVS[:3] for fw in ("linen", "nnx")]:
        for seed, host in ((1, "a"), (2, "b")):
            rows = csv_run(env, framework, seed, host=host)
            runs.append([{**row, "device_name": "cpu"} for row in rows])
    out = tmp_path / "out"
    path = write_csv(tmp_path / "runs.csv", runs)
    assert analyse(capsys, "--csv", path, "--out", out, "--no-figures").code == 0
    cell = (
        pd.read_csv(out / "speedups.csv").set_index(["metric", "pair"]).loc[("total", "nnx->linen")]
    )
    # 3 envs x 2 machines, one pair each
    assert (cell["n_pairs"], cell["n_clusters"]) == (6, 6)
    report = (out / "REPORT.md").read_text()
    assert "runs of a (cpu), b (cpu); each pair is of one machine" in report


def test_runs_of_one_machine_pair_across_seeds(tmp_path, capsys):
    """Within one machine every run of A pairs with every run of B (2 seeds: 4 pairs per env), and
    no note."""
    runs = [
        csv_run(env, framework, seed)
        for env in ENVS[:3]
        for framework in ("linen", "nnx")
        for seed in (1, 2)
    ]
    out = tmp_path / "out"
    runs_csv = write_csv(tmp_path / "r.csv", runs)
    assert analyse(capsys, "--csv", runs_csv, "--out", out, "--no-figures").code == 0
    cell = (
        pd.read_csv(out / "speedups.csv").set_index(["metric", "pair"]).loc[("total", "nnx->linen")]
    )
    assert (cell["n_pairs"], cell["n_clusters"]) == (12, 3)
    assert "each pair is of one machine" not in (out / "REPORT.md").read_text()


# ------------------------------------ item 7: the learning analysis counts its configuration's runs
def learning_input(extra: list[tuple[str, str, int, list, dict]]):
    """made_up_runs (linen and torch, 3 seeds each, all of exp9's configuration) plus runs given as
    (name, framework, seed, returns, changes to the summary row)."""
    runs, summary, _ = made_up_runs(never_reached=0)
    rows, frames = [], [runs]
    for name, framework, seed, returns, changes in extra:
        frames.append(run_rows(name, framework, seed, returns, 1.0))
        final = float(np.nanmean(returns[-10:])) if not np.isnan(returns[-10:]).all() else np.nan
        rows.append({**summary_row(name, framework, seed, final), **changes})
    summary = pd.concat([summary, pd.DataFrame(rows)], ignore_index=True)
    summary = summary.fillna({"tag": "t", "dtype": "float32", "num_iterations": 20})
    summary["batch_size"] = summary["batch_size"].fillna(512)
    masks = {name: pd.Series(name == EXP, index=summary.index) for name in STUDY.experiments}
    return pd.concat(frames, ignore_index=True), summary, masks


def learning_table(extra):
    runs, summary, masks = learning_input(extra)
    learned = learning.learning_runs(runs, summary, masks, STUDY)[0]
    return learning.learning_table(learned, STUDY), learning.learning_selection(
        summary, masks, STUDY
    )[1]


def with_args(name: str, seed: int, args: list[str]) -> tuple:
    """A linen run of exp9 (always at 500) whose command gives args."""
    command = summary_row(name, "linen", seed, 0.0, args)["command"]
    return (name, "linen", seed, [500.0] * 20, {"command": command})


def test_a_run_of_another_configuration_is_left_out_with_its_reason():
    """--num-steps 16 after the configuration's 128 (the last wins), another --num-iterations, or a
    hyperparameter the configuration leaves at its default: not exp9's configuration; left out of
    the table, listed with the flags it differs in. A flag that does not change the learning
    (--device) leaves the run in."""
    table, left_out = learning_table(
        [
            with_args("short", 4, [*CONFIG_ARGS, "--num-steps", "16"]),
            with_args("fewer", 5, [*CONFIG_ARGS, "--num-iterations", "12"]),
            with_args("gamma", 6, [*CONFIG_ARGS, "--gamma", "0.9"]),
            with_args("device", 7, [*CONFIG_ARGS, "--device", "cpu"]),
        ]
    )
    assert table.set_index("framework").loc["linen", "n_runs"] == 4
    reasons = left_out.set_index("run")["reason"]
    assert "--num-steps" in reasons["short"] and "--num-iterations" in reasons["fewer"]
    assert "--gamma" in reasons["gamma"] and "device" not in reasons


def test_two_tags_are_not_pooled_and_a_seed_counts_once():
    again = ("again", "linen", 1, [100.0] * 20, {"start_time": "2099-01-01"})
    mac = [(f"mac{seed}", "linen", seed, [500.0] * 20, {"tag": "mac"}) for seed in (1, 2)]
    table, left_out = learning_table([again, *mac])
    linen = table[table["framework"] == "linen"].set_index("tag")
    assert linen.loc["t", "n_runs"] == 3 and linen.loc["mac", "n_runs"] == 2
    assert "seed 1 again" in left_out.set_index("run").loc["again", "reason"]


def test_a_learning_table_of_two_tags_is_not_replaced_by_one_of_them(tmp_path):
    """learning.csv's rows are one per tag: a call that analyses one tag's runs would lose the
    other's row, which --out's check of lost rows must see; a learning.csv of before the tag column
    was of the default tag."""
    mac = [(f"mac{seed}", "linen", seed, [500.0] * 20, {"tag": "mac"}) for seed in (1, 2)]
    both = learning_table(mac)[0]
    assert set(both["tag"]) == {"t", "mac"}
    both.to_csv(tmp_path / "learning.csv", index=False)
    one_tag = both[both["tag"] == "t"]
    losses = output.lost_rows(tmp_path, {"learning.csv": one_tag})
    assert losses == [f"learning.csv: 1 of its {len(both)} rows are not in this analysis"]
    default = one_tag.assign(tag="default")
    default.drop(columns="tag").to_csv(tmp_path / "learning.csv", index=False)
    assert output.lost_rows(tmp_path, {"learning.csv": default}) == []


def test_a_seed_that_ended_no_episode_counts_as_not_reaching_and_shows():
    """A third torch seed that ended no episode: no return, so it reaches no target, the mean of the
    others does not make the framework meet the reference, and the table says how many runs had no
    return."""
    runs, summary, masks = made_up_runs(never_reached=0)
    torch = summary.index[(summary["framework"] == "torch") & (summary["seed"] == 3)][0]
    name = summary.at[torch, "run"]
    runs.loc[runs["run"] == name, "charts/episodic_return"] = np.nan
    summary.at[torch, "final_return"] = np.nan
    learned = learning.learning_runs(runs, summary, masks, STUDY)[0]
    table = learning.learning_table(learned, STUDY).set_index("framework")
    assert table.loc["torch", "n_runs"] == 3 and table.loc["torch", "n_returns"] == 2
    assert (
        table.loc["torch", "reached_reference"] == 2 and not table.loc["torch", "meets_reference"]
    )
    cell = markdown.final_cell(next(table.reset_index().query("framework == 'torch'").itertuples()))
    assert "1 of 3 runs ended no episode" in cell


# ------------------------------------------------------ item 9: a linked run folder, for both alike
def test_a_linked_run_folder_is_counted_by_neither_and_listed_as_skipped(tmp_path, capsys):
    elsewhere = linen_run(tmp_path / "elsewhere" / "exp1")
    command = with_command(elsewhere)
    exp_dir = tmp_path / "runs" / "exp1"
    exp_dir.mkdir(parents=True)
    (exp_dir / elsewhere.name).symlink_to(elsewhere, target_is_directory=True)
    linen_run(exp_dir, env="Acrobot-v1")  # a run to analyse
    assert sweep_resume.run_key(command) not in sweep_resume.completed_keys(exp_dir)
    out = tmp_path / "out"
    analyse(capsys, tmp_path / "runs", "--out", out, "--no-figures")
    skipped = skipped_section(out)
    assert elsewhere.name in skipped and "a link to a folder" in skipped


# ---------------------------------- item 14: a summary.json nested too deep, or a FIFO in its place
BROKEN = {
    "deep": "nested deeper than 32 levels",  # atomic.py's reader
    "fifo": "summary.json is not a regular file",
    "events fifo": "is not a regular file",
}


def broken_summary(run_dir: Path, kind: str) -> None:
    """run_dir with summary.json nested 100,000 deep, or a FIFO in its place (or in its events
    file's)."""
    summary = run_dir / "summary.json"
    if kind == "deep":
        summary.write_text("[" * 100_000 + "]" * 100_000)
    else:
        (path,) = run_dir.glob("events.out.tfevents.*") if kind == "events fifo" else (summary,)
        path.unlink()
        os.mkfifo(path)


@pytest.mark.parametrize("kind", BROKEN)
def test_a_summary_nested_too_deep_or_a_fifo_is_skipped_by_the_resume_and_the_analysis(
    tmp_path, kind
):
    """Each in a process of its own, so that a hang fails the test (the timeout is a safety net, not
    a measure)."""
    runs = tmp_path / "runs"
    good = linen_run(runs / "exp1")
    with_command(good)
    broken = linen_run(runs / "exp1", env="Acrobot-v1")
    with_command(broken)
    broken_summary(broken, kind)
    resume = (
        "import sys; from sweep import resume as sweep_resume; from pathlib import Path; "
        "print(len(sweep_resume.completed_keys(Path(sys.argv[1]))))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", resume, str(good.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0 and proc.stdout.split() == ["1"], proc.stderr[-2000:]
    out = tmp_path / "out"
    plot = [sys.executable, str(ROOT / "plot_results.py"), str(runs), "--out", str(out)]
    proc = subprocess.run(
        [*plot, "--no-figures"], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    skipped = skipped_section(out)
    assert broken.name in skipped and BROKEN[kind] in skipped


def test_read_json_refuses_a_file_larger_than_a_run_writes(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"status": "completed", "pad": "x" * (runlog.MAX_JSON_BYTES + 1)}))
    with pytest.raises(runlog.RunError, match="more than a run writes"):
        runlog.read_json(path)


def test_the_commands_flags_are_read_as_the_scripts_parser_reads_them():
    from core import run_args

    words = ["p.py", "--env", "A", "--num_envs=4", "--no-sync-timing", "--track", "--seed", "1"]
    assert run_args.flags(words) == {
        "env": "A",
        "num_envs": "4",
        "sync_timing": False,
        "track": True,
        "seed": "1",
    }
    assert run_args.same_value("2.5e-4", 0.00025) and not run_args.same_value("1", True)
    assert math.isclose(float(run_args.flags(["p", "--x", "-1"])["x"]), -1)
    assert shlex.split(shlex.join(words)) == words

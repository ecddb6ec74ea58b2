"""bench.sh --smoke, the quick sweep of study.toml's [presets.smoke]: what it plans, which options
it refuses beside it, how a preset is read, and (slow) that the sweep's analysis shows data in every
panel of every figure it draws."""

import re
import shlex
from pathlib import Path

import pytest
from analysis_runs import has_data
from sweep_runs import bench, cell_of, dry_run, framework_of, last_line, option

import plot_results
from analysis import figures
from core import study
from helpers import ROOT, STUDY, read_json

SMOKE = STUDY.presets["smoke"]


def test_the_smoke_sweep_runs_every_framework_once_in_its_default_mode(tmp_path):
    lines = dry_run(tmp_path, "--smoke")
    assert sorted(framework_of(line) for line in lines) == sorted(STUDY.frameworks)
    assert len({cell_of(line) for line in lines}) == 1  # one experiment, seed, env and size
    for line in lines:
        assert option(line, "--compile") == STUDY.default_compile(framework_of(line))
        # the steady window has data
        assert int(option(line, "--num-iterations")) > STUDY.steady.first
        assert line.endswith(" " + shlex.join(SMOKE.args))  # the preset's run arguments
        assert Path(option(line, "--log-dir")).parent == tmp_path / "runs"  # --log-dir, as given


def test_the_smoke_sweep_goes_to_a_folder_of_its_own_and_takes_the_other_options(tmp_path):
    proc = bench("--smoke", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = [line.removeprefix("# done: ") for line in proc.stdout.splitlines()[:-1]]
    assert {Path(option(line, "--log-dir")).parent for line in lines} == {Path("runs-smoke")}
    lines = dry_run(
        tmp_path, "--smoke", "--cpus", "1", "--tag", "smoke-test", "--", "--gamma", "0.9"
    )
    assert all(" --tag smoke-test " in line and line.endswith(" --gamma 0.9") for line in lines)


@pytest.mark.parametrize("name", sorted(SMOKE.options))
def test_an_option_the_preset_sets_is_refused_beside_it(tmp_path, name):
    """Even with the preset's own value: its options are its own."""
    proc = bench(
        "--smoke", "--dry-run", "--log-dir", str(tmp_path), f"--{name}", SMOKE.options[name]
    )
    assert proc.returncode == 2, proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1 and f"--{name}" in proc.stderr


@pytest.mark.parametrize("flag", [arg for arg in SMOKE.args if arg.startswith("--")])
def test_a_run_argument_that_would_override_the_presets_is_refused(tmp_path, flag):
    underscored = flag[:2] + flag[2:].replace("-", "_") + "=1"  # another spelling the scripts take
    for words in ([flag, "1"], [underscored]):
        proc = bench("--smoke", "--dry-run", "--log-dir", str(tmp_path), "--", *words)
        assert proc.returncode == 2, proc.stdout
        assert len(proc.stderr.strip().splitlines()) == 1 and words[0] in proc.stderr


def test_a_refused_smoke_sweep_makes_nothing_and_an_unknown_preset_is_named(tmp_path):
    proc = bench("--smoke", "--seeds", "2", "--log-dir", str(tmp_path / "runs"))
    assert proc.returncode == 2 and "--seeds" in proc.stderr and not (tmp_path / "runs").exists()
    proc = bench("--preset", "nope", "--dry-run", "--log-dir", str(tmp_path))
    assert proc.returncode == 2 and "'nope'" in proc.stderr and "smoke" in proc.stderr


def test_help_lists_the_presets_and_the_smoke_flag():
    proc = bench("--help")
    assert proc.returncode == 0 and "--smoke" in proc.stdout
    assert re.search(rf"^  smoke +{re.escape(SMOKE.title)}$", proc.stdout, re.M)
    assert f"--seeds {SMOKE.options['seeds']}" in proc.stdout


def preset_study(tmp_path: Path, old: str, new: str) -> Path:
    """study.toml with `old` in its smoke preset replaced by `new`."""
    text = (ROOT / "study.toml").read_text()
    head, preset = text.split("[presets.smoke]\n")
    assert old in preset
    path = tmp_path / "study.toml"
    path.write_text(head + "[presets.smoke]\n" + preset.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "old, new, named",
    [
        (
            f"iterations = {SMOKE.options['iterations']}",
            f"iterations = {STUDY.steady.first}",
            "steady",
        ),
        ("seeds = ", "epochs = 3\nseeds = ", "epochs"),
        ("seeds = 1", "seeds = 0", "seeds"),
        ('sizes = ["small"]', "sizes = []", "sizes"),
    ],
)
def test_a_bad_preset_is_named(tmp_path, old, new, named):
    with pytest.raises(ValueError, match=named):
        study.parse(preset_study(tmp_path, old, new))


@pytest.mark.slow
def test_the_smoke_sweep_and_its_analysis_show_data_in_every_panel(tmp_path, monkeypatch):
    """Every script's real run through bench.sh (--cpus 1: on one core, one thread; each run's
    progress line and log), skipped when asked again; then the analysis."""
    log_dir, out = tmp_path / "runs", tmp_path / "out"
    num_runs = len(STUDY.frameworks)
    proc = bench("--smoke", "--cpus", "1", "--log-dir", str(log_dir), timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert last_line(proc) == f"{num_runs} completed, 0 failed, 0 skipped"
    assert "every run on cores 0 with 1 threads" in proc.stdout
    progress = rf"^\[\d+/{num_runs}\] .* completed in .* \| ETA "
    assert len(re.findall(progress, proc.stdout, re.M)) == num_runs
    assert (log_dir / "env_timing.json").exists()
    summaries = sorted((log_dir / "exp1").glob("*/summary.json"))
    frameworks = [read_json(path.parent / "config.json")["framework"] for path in summaries]
    assert sorted(frameworks) == sorted(STUDY.frameworks)
    for path in summaries:
        summary, config = read_json(path), read_json(path.parent / "config.json")
        assert summary["status"] == "completed"
        assert summary["iterations_completed"] == int(SMOKE.options["iterations"])
        assert config["sync_timing"] is False and config["exp_name"] == "exp1"
        # --cpus 1: every framework on the same core, torch with one thread
        assert config["cpu_affinity"] == [0], config["cpu_affinity"]
        assert config.get("torch_threads", 1) == 1
    assert len(list((log_dir / "logs" / "exp1").glob("*.log"))) == num_runs
    # the same sweep again: every run is skipped
    again = bench("--smoke", "--cpus", "1", "--log-dir", str(log_dir), timeout=600)
    assert again.returncode == 0, again.stderr
    assert last_line(again) == f"0 completed, 0 failed, {num_runs} skipped"

    saved, save = {}, figures.save_figure

    def keep(fig, path):
        saved[Path(path).name] = fig
        save(fig, path)

    monkeypatch.setattr(figures, "save_figure", keep)
    plot_results.main([str(log_dir), "--out", str(out)])
    experiments = SMOKE.options["experiments"].split(",")
    listed = {
        figures.KINDS[kind].file.format(experiment=owner)
        for kind, owner in figures.listed_figures(STUDY)
        if owner in experiments
    }
    assert listed <= set(saved)  # every figure of its experiments drawn
    for name, fig in saved.items():
        assert [ax.get_title() for ax in fig.axes if not has_data(ax)] == [], name
    report = (out / "REPORT.md").read_text()
    assert "needs runs of" not in report and "Steady state" in report

"""Learning curves: each run's episodic return against env steps, one panel per env (part of benchback-rl).

    python -m analysis.learning_curves results/continuous/runs --out results/continuous/learning_curves.png

Every completed run under the folders is drawn, coloured by framework (study.toml's colours), a panel per env label
(an env on envpool apart from its gymnax twin: "CartPole-v1@envpool"); beside the figure,
{out}.md tables each run's final return (summary.json: the mean return of its last 10 iterations) and env steps.
An existing --out is replaced only with --force; nothing is written (exit status 2) when no completed run has an
episodic return.
"""

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

import runlog  # noqa: E402
import study  # noqa: E402
from analysis.loading import run_env  # noqa: E402
from analysis.plotting import framework_colors  # noqa: E402

RETURN = "charts/episodic_return"


def completed_runs(roots: list[str]) -> list:
    """Every completed run under roots (runlog's reader); the others are left out."""
    runs = []
    for run_dir in runlog.run_dirs(roots):
        try:
            runs.append(runlog.read_completed_run(run_dir))
        except runlog.RunError:  # not completed, or not readable: not drawn
            continue
    return runs


def curves(runs) -> dict[str, list]:
    """Per env, (framework, seed, steps, returns) of every run that logged an episodic return."""
    by_env = {}
    for run in runs:
        points = run.scalars[["step", RETURN]].dropna() if RETURN in run.scalars else None
        if points is None or points.empty:
            continue
        curve = (run.config["framework"], run.config["seed"], points["step"], points[RETURN])
        by_env.setdefault(run_env(run.config), []).append(curve)
    return by_env


def final_returns(runs) -> str:
    """A markdown table: env, framework, seed, env steps and final return of every run, sorted."""
    rows = []
    for run in runs:
        steps = run.config["batch_size"] * run.summary["iterations_completed"]
        final = run.summary.get("final_return")
        final = "–" if final is None else f"{final:.1f}"
        rows.append((run_env(run.config), run.config["framework"], run.config["seed"], steps, final))
    lines = ["| env | framework | seed | env steps | final return |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {env} | {fw} | {seed} | {steps:,} | {final} |" for env, fw, seed, steps, final in sorted(rows)]
    return "\n".join(lines) + "\n"


def draw(by_env: dict[str, list], colors: dict[str, str], out: Path) -> None:
    envs = sorted(by_env)
    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4), squeeze=False)
    for ax, env in zip(axes[0], envs):
        drawn = set()
        for framework, seed, steps, returns in sorted(by_env[env], key=lambda curve: curve[:2]):
            label = None if framework in drawn else framework
            ax.plot(steps, returns, color=colors.get(framework), label=label, linewidth=1.6, alpha=0.85)
            drawn.add(framework)
        ax.set_title(env)
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(EngFormatter())  # 200 k, 1 M
        ax.set_ylabel("episodic return")
        ax.grid(alpha=0.3)
        ax.legend(title="framework")
    fig.tight_layout()
    partial = out.with_name(out.name + ".partial.png")
    fig.savefig(partial, dpi=120)
    plt.close(fig)
    partial.replace(out)  # whole or not at all


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_dirs", nargs="+", metavar="RUNS_DIR", help="folders searched for run folders")
    parser.add_argument("--out", required=True, type=Path, metavar="PNG", help="the figure to write")
    parser.add_argument("--force", action="store_true", help="replace an existing --out")
    args = parser.parse_args(argv)
    if args.out.suffix != ".png":
        parser.error(f"--out {args.out}: must end in .png")
    if args.out.exists() and not args.force:
        parser.error(f"--out {args.out} exists; --force replaces it")
    runs = completed_runs(args.runs_dirs)
    by_env = curves(runs)
    if not by_env:
        parser.error(f"no completed run with an episodic return under {', '.join(args.runs_dirs)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    draw(by_env, framework_colors(study.load()), args.out)
    args.out.with_suffix(".md").write_text(final_returns(runs))
    print(f"{args.out}: {sum(len(c) for c in by_env.values())} runs, envs {', '.join(sorted(by_env))}")


if __name__ == "__main__":
    main(sys.argv[1:])

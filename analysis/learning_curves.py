"""Learning curves: each run's episodic return against env steps, one panel per env (part of
benchback-rl).

    python -m analysis.learning_curves results/continuous/runs \
        --out results/continuous/learning_curves.png

Every completed run under the folders is drawn (each agent of a run of --num-agents N, as seed
seed + k: its agent_{k}/ tags), coloured by framework (study.toml's colours), a
panel per env label (an env on envpool apart from its gymnax twin: "CartPole-v1@envpool"); beside
the figure, {out}.md tables each run's final return (summary.json: the mean return of its last 10
iterations) and env steps. An existing --out is replaced only with --force, and only when this tool
wrote it (MARK in its PNG text chunk; one of before the mark by the .md beside it, which starts with
the table's header), and so is the .md beside it (its first line md_mark, or that header); nothing
is written (exit status 2, one line) when no completed run has an episodic return, or a path is
empty or cannot be written, or holds a file of someone else (atomic.py and analysis/owned.py: --out,
named by the user, is followed if it is a link; the .md beside it never is; never into a folder or
a device).
"""

import argparse
import io
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

from analysis import owned  # noqa: E402
from analysis.common import (
    BadInput,  # noqa: E402
    md_text,  # noqa: E402
)
from analysis.loading import run_env  # noqa: E402
from analysis.plotting import framework_colors  # noqa: E402
from atomic import check_inside, md_mark, write_file  # noqa: E402
from core import (
    runlog,  # noqa: E402
    study,  # noqa: E402
)
from core.events import RETURN, agent_column  # noqa: E402


def completed_runs(roots: list[str]) -> list:
    """Every completed run under roots (runlog's reader); the others are left out."""
    runs = []
    for run_dir in runlog.run_dirs(roots):
        try:
            runs.append(runlog.read_completed_run(run_dir))
        except runlog.RunError:  # not completed, or not readable: not drawn
            continue
    return runs


def agents(run) -> list[tuple[int, str, object]]:
    """Each agent of a run, a seed of its own: (seed + k, the column of its return, its final
    return); a run of one agent is itself (its return, final_return)."""
    count, seed = run.config.get("num_agents", 1), run.config["seed"]
    if count == 1:
        return [(seed, RETURN, run.summary.get("final_return"))]
    finals = runlog.final_returns(run.summary, count)
    return [(seed + k, agent_column(k), finals[k]) for k in range(count)]


def curves(runs) -> dict[str, list]:
    """Per env, (framework, seed, steps, returns) of every run (each agent of a run of several)
    that logged an episodic return."""
    by_env = {}
    for run in runs:
        for seed, column, _ in agents(run):
            points = run.scalars[["step", column]].dropna() if column in run.scalars else None
            if points is None or points.empty:
                continue
            curve = (run.config["framework"], seed, points["step"], points[column])
            by_env.setdefault(run_env(run.config), []).append(curve)
    return by_env


def final_returns(runs) -> str:
    """A markdown table: env, framework, seed, env steps and final return of every run (each agent
    of a run of several: seed + k, its env steps), sorted."""
    rows = []
    for run in runs:
        steps = run.config["batch_size"] * run.summary["iterations_completed"]
        for seed, _, final in agents(run):
            final = "–" if final is None else f"{final:.1f}"
            rows.append((run_env(run.config), run.config["framework"], seed, steps, final))
    lines = [md_mark(TOOL), TABLE_HEADER, "| --- | --- | --- | --- | --- |"]
    lines += [
        f"| {md_text(env)} | {md_text(fw)} | {seed} | {steps:,} | {final} |"
        for env, fw, seed, steps, final in sorted(rows)
    ]
    return "\n".join(lines) + "\n"


TOOL = "analysis.learning_curves"
# the PNG text chunk that marks a figure as this tool's (savefig's metadata)
MARK = {"Source": f"written by {TOOL}; its next run with the same --out and --force replaces it"}
# the table's first line: the first line of its .md before md_mark, by which such a figure and .md
# are known as this tool's
TABLE_HEADER = "| env | framework | seed | env steps | final return |"


def why_not_ours(out: Path, path: Path):
    """None when the file at path (the figure out, or the .md beside it) is this tool's, else why
    not: a figure by its text chunk, or (one of before the mark) by the .md beside it; the .md by
    its first line."""
    table = out.with_suffix(".md")
    first = (
        owned.read_head(table, len(md_mark(TOOL)) * 2).decode("utf-8", "replace").partition("\n")[0]
        if table.is_file() and not table.is_symlink()
        else None
    )
    chunks = owned.png_text(owned.read_head(out, owned.MAX_FIGURE_HEAD)) if path == out else {}
    if chunks.get("Source") == MARK["Source"]:
        return None
    if first == TABLE_HEADER or (path == table and first == md_mark(TOOL)):
        return None
    return f"was not written by {TOOL} (no mark of it)"


def draw(by_env: dict[str, list], colors: dict[str, str], out: Path) -> None:
    """The figure, written to out whole or not at all (out, named by the user, followed: through a
    link to the file it leads to)."""
    envs = sorted(by_env)
    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4), squeeze=False)
    for ax, env in zip(axes[0], envs):
        drawn = set()
        for framework, seed, steps, returns in sorted(by_env[env], key=lambda curve: curve[:2]):
            label = None if framework in drawn else framework
            ax.plot(
                steps, returns, color=colors.get(framework), label=label, linewidth=1.6, alpha=0.85
            )
            drawn.add(framework)
        ax.set_title(env)
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(EngFormatter())  # 200 k, 1 M
        ax.set_ylabel("episodic return")
        ax.grid(alpha=0.3)
        ax.legend(title="framework")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120, metadata=MARK)
    plt.close(fig)
    write_file(out, png.getvalue(), given=out)


def check(args: argparse.Namespace) -> None:
    """BadInput for an empty path, an --out that is not a .png or is there already (without
    --force), or one that cannot be written, before anything is read."""
    for flag, path in [*(("RUNS_DIR", path) for path in args.runs_dirs), ("--out", args.out)]:
        if path == "":
            raise BadInput(f"{flag} '': an empty path names no file or folder")
    out = Path(args.out)
    if out.suffix != ".png":
        raise BadInput(f"--out {out}: must end in .png")
    if (out.exists() or out.is_symlink()) and not args.force:
        raise BadInput(f"--out {out} exists; --force replaces it")
    # --out is the user's (followed); the .md beside it is the tool's: never written through a link
    for path, given in ((out, out), (out.with_suffix(".md"), out.parent)):
        real = owned.inside("--out", given, path)
        # the folders below it are made
        folder = next(p for p in real.parents if p.exists())
        if folder != real.parent and not folder.is_dir():
            raise BadInput(f"--out {out}: {folder} is not a folder")
        if folder == real.parent:
            owned.check_target("--out", path, given=given)
        # a file there (--force for the figure) is replaced only when this tool wrote it
        reason = why_not_ours(out, path) if real.is_file() else None
        if reason:
            raise BadInput(f"--out: {path} {reason}: it is left as it is, --force or not")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "runs_dirs", nargs="+", metavar="RUNS_DIR", help="folders searched for run folders"
    )
    parser.add_argument("--out", required=True, metavar="PNG", help="the figure to write")
    parser.add_argument("--force", action="store_true", help="replace an existing --out")
    args = parser.parse_args(argv)
    try:
        check(args)
        runs = completed_runs(args.runs_dirs)
        by_env = curves(runs)
        if not by_env:
            raise BadInput(
                f"no completed run with an episodic return under {', '.join(args.runs_dirs)}"
            )
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    out = Path(args.out)
    check_inside(out, out).parent.mkdir(parents=True, exist_ok=True)
    draw(by_env, framework_colors(study.load()), out)
    write_file(out.with_suffix(".md"), final_returns(runs))
    print(f"{out}: {sum(len(c) for c in by_env.values())} runs, envs {', '.join(sorted(by_env))}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Brax's own PPO on a MuJoCo Playground env with Playground's published configuration: the anchor
our templates are read against on the same env (time to the return it reaches, compile included).

Brax's PPO (brax.training.agents.ppo.train) runs as Playground's own learning script runs it: the
env loaded with impl "jax" (MJX in pure JAX, as env_adapters.py loads it), wrapped by
wrap_for_brax_training, trained with dm_control_suite_params.brax_ppo_config(env) and Brax's
default networks. --num-timesteps, --num-evals and --num-envs replace the published values (the
record keeps both). One JAX shim, stated in the record: brax 0.14.2 calls jax.device_put_replicated,
which JAX 0.10 removed from its namespace (google/brax#671); the tool puts JAX's own function back
(jax._src.api.device_put_replicated), which only sets up brax's pmap over the local devices.

This process is the run (imports, compile and training, as a user's): each of Brax's evaluations
is recorded with its env steps, its mean episode return and the seconds since this process
started. --ours RUN_DIR (a template's run on the same env, e.g. `python ppo_linen.py --env
playground-CartpoleBalance ...`) adds each run's time/elapsed at the first iteration whose training
return reaches Brax's last evaluation, and its return at Brax's env steps.

    python -m benchmarks.brax_ppo --env CartpoleBalance
    python -m benchmarks.brax_ppo --env CheetahRun --num-timesteps 20000000 --ours runs/RUN_DIR

Output: --out (default results/benchmarks/brax_ppo_ENV_DEVICE.json) and the .md beside it,
rewritten after every evaluation. Exit status: 0; 2 for bad input (one line, before anything is
made); 130 when stopped (SIGINT, SIGTERM or SIGHUP: at the next evaluation, a second signal at
once; what was measured is kept).
"""

import time

START = time.perf_counter()

import argparse  # noqa: E402
import sys  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from importlib import metadata  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Optional  # noqa: E402

import atomic  # noqa: E402
from analysis.common import BadInput  # noqa: E402
from atomic import OutputRefused, check_outputs, write_outputs  # noqa: E402
from benchmarks.common import ROOT, Parser, human, machine, machine_text, run_recorded  # noqa: E402
from core import runlog  # noqa: E402
from core.env_ids import PLAYGROUND_ENVS  # noqa: E402

TOOL = "benchmarks.brax_ppo"
NAMES = tuple(env.removeprefix("playground-") for env in PLAYGROUND_ENVS)
PACKAGES = ("jax", "jaxlib", "brax", "playground", "mujoco", "mujoco-mjx", "flax", "optax")
SHIM = (
    "jax.device_put_replicated = jax._src.api.device_put_replicated (removed from jax's namespace)"
)
OVERRIDES = ("num_timesteps", "num_evals", "num_envs")


# ------------------------------------------------------------------------------------- options
def parser() -> Parser:
    p = Parser(prog="python -m " + TOOL, description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--env", required=True, help="a DM Control env of Playground, e.g. CheetahRun")
    p.add_argument("--num-timesteps", type=int, help="env steps (default: the published config's)")
    p.add_argument("--num-evals", type=int, help="evaluations (default: the published config's)")
    p.add_argument("--num-envs", type=int, help="envs stepped at once (default: the config's)")
    p.add_argument("--seed", type=int, default=0, help="Brax's seed (default: %(default)s)")
    ours = "a template's run on the same env, read beside Brax's (several may be given)"
    p.add_argument("--ours", nargs="+", default=[], metavar="RUN_DIR", help=ours)
    p.add_argument("--out", help="JSON, the .md beside it (default: see above)")
    return p


def checked(opts: argparse.Namespace) -> argparse.Namespace:
    """opts with --out settled; BadInput naming the bad value and what would do."""
    name = opts.env.removeprefix("playground-")
    if name not in NAMES:
        raise BadInput(
            f"--env {opts.env!r}: not a DM Control env of Playground ({', '.join(NAMES)})"
        )
    opts.env = name
    for option in OVERRIDES:
        value = getattr(opts, option)
        if value is not None and value < 1:
            raise BadInput(f"--{option.replace('_', '-')} {value}: give 1 or more")
    for run_dir in opts.ours:
        config = Path(run_dir, "config.json")
        if not config.is_file():
            raise BadInput(f"--ours {run_dir}: no config.json in it (a template's run folder)")
        env = runlog.read_json(config).get("env")
        if env != f"playground-{name}":
            raise BadInput(f"--ours {run_dir}: a run on {env!r}, not on playground-{name}")
    device = "gpu" if any(d.platform == "gpu" for d in jax_devices()) else jax_devices()[0].platform
    opts.out = opts.out or str(ROOT / "results" / "benchmarks" / f"brax_ppo_{name}_{device}.json")
    return opts


def jax_devices():
    import jax

    return jax.devices()


# ------------------------------------------------------------------------------ Brax's PPO
def published_config(name: str) -> dict:
    """Playground's Brax PPO configuration for the env, as its learning script reads it."""
    import env_adapters

    with env_adapters.quiet_mujoco():
        from mujoco_playground.config import dm_control_suite_params
    return dm_control_suite_params.brax_ppo_config(name).to_dict()


def restore_device_put_replicated() -> None:
    """The one JAX shim (SHIM): brax 0.14.2's PPO places its training state with it."""
    import jax
    from jax._src import api

    if not hasattr(jax, "device_put_replicated"):
        jax.device_put_replicated = api.device_put_replicated


def train(opts, record: dict, save) -> None:
    """Brax's PPO with the record's configuration; each evaluation appended to record["evals"]
    and saved."""
    import env_adapters

    restore_device_put_replicated()
    from brax.training.agents.ppo import train as ppo
    from mujoco_playground import wrapper

    env, _ = env_adapters.load_playground(opts.env)
    eval_env, _ = env_adapters.load_playground(opts.env)
    record["import_s"] = time.perf_counter() - START

    def progress(step: int, metrics: dict) -> None:
        evaluation = {
            "env_steps": int(step),
            "return": float(metrics["eval/episode_reward"]),
            "return_std": float(metrics["eval/episode_reward_std"]),
            "elapsed_s": time.perf_counter() - START,
        }
        record["evals"].append(evaluation)
        save()
        # a safe point: a stop signal ends the run here, its evaluations kept
        atomic.check_stop()
        print(
            f"{step:,} env steps: return {evaluation['return']:.1f} after "
            f"{human(evaluation['elapsed_s'])}",
            flush=True,
        )

    ppo.train(
        environment=env,
        eval_env=eval_env,
        wrap_env_fn=wrapper.wrap_for_brax_training,
        progress_fn=progress,
        seed=opts.seed,
        **record["config"],
    )


# ------------------------------------------------------------------------------ ours beside it
def our_row(run_dir: str, target: Optional[float], env_steps: Optional[int]) -> dict:
    """A template's run: its elapsed time at the first iteration whose training return reaches
    target, and its return at env_steps (the iteration that ends at or after them)."""
    run = runlog.read_run(run_dir)
    scalars = run.scalars
    returns = scalars["charts/episodic_return"]
    elapsed = scalars["time/elapsed"]
    row = {"run": str(run_dir), "framework": run.config.get("framework"), "reached_s": None}
    row["env_steps"] = int(scalars["step"].iloc[-1])
    row["final_return"] = float(returns.dropna().iloc[-1]) if returns.notna().any() else None
    row["total_s"] = run.summary.get("total_s")
    if target is not None:
        reached = scalars[returns >= target]
        if len(reached):
            row["reached_s"] = float(elapsed[reached.index[0]])
            row["reached_steps"] = int(reached["step"].iloc[0])
    if env_steps is not None:
        at = scalars[(scalars["step"] >= env_steps) & returns.notna()]
        row["return_at_brax_steps"] = float(returns[at.index[0]]) if len(at) else None
    return row


# ------------------------------------------------------------------------------------ report
def markdown(record: dict) -> str:
    evals = record["evals"]
    lines = [
        f"# Brax's PPO on MuJoCo Playground's {record['env']} (status {record['status']})",
        "",
        f"On {machine_text(record['machine'])}, JAX devices: {record['devices']}; started "
        f"{record['started']} (UTC). Made by `{record['command']}`.",
        "",
        f"Playground's published configuration, with {record['overrides'] or 'nothing'} replaced; "
        f"the JAX shim: `{record['shim']}`. Versions: "
        + ", ".join(f"{k} {v}" for k, v in record["versions"].items())
        + ".",
        "",
        "| env steps | eval return (mean ± std) | seconds since the process started |",
        "|---:|---:|---:|",
    ]
    for e in evals:
        lines.append(
            f"| {e['env_steps']:,} | {e['return']:.1f} ± {e['return_std']:.1f} "
            f"| {e['elapsed_s']:.1f} |"
        )
    if record["ours"]:
        lines += ["", ours_table(record)]
    return "\n".join(lines) + "\n"


def ours_table(record: dict) -> str:
    last = record["evals"][-1] if record["evals"] else None
    target = "-" if last is None else f"{last['return']:.1f}"
    lines = [
        f"Ours beside it: the training return (charts/episodic_return, stochastic policy) against "
        f"Brax's last evaluation ({target}, deterministic policy), time/elapsed since the process "
        "started, compile included.",
        "",
        "| run | framework | reaches it after, s (env steps) | return at Brax's env steps "
        "| last return (env steps) | whole run, s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in record["ours"]:
        reached = "not reached"
        if row["reached_s"] is not None:
            reached = f"{row['reached_s']:.1f} ({row['reached_steps']:,})"
        at, last = row.get("return_at_brax_steps"), row["final_return"]
        lines.append(
            f"| {Path(row['run']).name} | {row['framework']} | {reached} | {number(at)} | "
            f"{number(last)} ({row['env_steps']:,}) | {number(row['total_s'])} |"
        )
    return "\n".join(lines)


def number(value) -> str:
    return "-" if value is None else f"{value:.1f}"


# -------------------------------------------------------------------------------------- main
def versions() -> dict:
    found = {}
    for package in PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def new_record(opts, argv: list[str]) -> dict:
    published = published_config(opts.env)
    given = {key: getattr(opts, key) for key in OVERRIDES if getattr(opts, key) is not None}
    return {
        "command": "python -m " + TOOL + " " + " ".join(argv),
        "status": "running",
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "devices": [str(d) for d in jax_devices()],
        "env": opts.env,
        "published": published,
        "overrides": given,
        "config": {**published, **given},
        "shim": SHIM,
        "versions": versions(),
        "evals": [],
        "ours": [],
    }


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = checked(parser().parse_args(argv))
        check_outputs(TOOL, opts.out)
    except (BadInput, OutputRefused, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    record = new_record(opts, argv)

    def save() -> None:
        write_outputs(TOOL, opts.out, record, markdown(record), opts.out)

    def run() -> None:
        train(opts, record, save)
        last = record["evals"][-1] if record["evals"] else None
        target = last["return"] if last else None
        steps = last["env_steps"] if last else None
        record["ours"] = [our_row(run_dir, target, steps) for run_dir in opts.ours]

    print(f"results: {opts.out}", flush=True)
    # SIGINT, SIGTERM, SIGHUP: the run stops at the next evaluation (a second signal at once),
    # with status "interrupted", what was measured kept, exit code 130
    stop = atomic.Interrupts("the next evaluation")
    with stop.installed(for_good=argv is None):
        if not run_recorded(TOOL, opts.out, record, markdown, run):
            stop.exit()
    return 0


if __name__ == "__main__":
    sys.exit(main())

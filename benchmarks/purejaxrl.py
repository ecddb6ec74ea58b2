"""PureJaxRL side by side (issue 57): its own purejaxrl/ppo.py, `jax.jit(jax.vmap(make_train(c)))`
over N seeds as its README runs it, against ppo_linen.py, ppo_nnx.py and ppo_equinox.py run with
--num-agents N and the same configuration, on CartPole-v1 (gymnax), each run a fresh process with
no JAX cache, the sides in a rotating order round by round; medians over rounds and their ratios.

--mode scaling (the default): for each N of --agents and each configuration (cleanrl: CleanRL's
ppo.py, 4 envs x 128 steps, 4 epochs x 4 minibatches; ours: the templates' 32 x 256, 10 x 8),
steady agent-steps per second and peak memory, and ours as a user trains: each template's run
followed by the same with --no-sync-timing (the fast path), its agent-steps per second over whole
iterations. --mode whole: one agent, the whole process as a user runs it (`python ppo_linen.py
--env CartPole-v1 --no-sync-timing`, 100 iterations at our configuration) against PureJaxRL's
make_train trained once in a fresh process (imports, compile, the same iterations): wall time and
peak memory.

PureJaxRL runs from --purejaxrl-dir (a checkout; nothing of it is copied or changed) in a venv of
its own from benchmarks/purejaxrl-requirements.txt (made once in --work-dir, unless
--purejaxrl-python is given): its distrax needs tensorflow-probability, which fails with our jax,
so it runs on the jax that file pins; the record lists each side's versions. With --shims it runs
on this interpreter, on our JAX, with benchmarks/purejaxrl_shims.py's stand-ins for what that venv
holds and ours lacks (distrax's Categorical, gymnax 0.0.x's five-value step, chex's type names):
both sides on one JAX, and on an accelerator machine whose image carries one JAX.

    python -m benchmarks.purejaxrl --purejaxrl-dir ~/purejaxrl            # scaling, 3 rounds
    python -m benchmarks.purejaxrl --purejaxrl-dir ~/purejaxrl --mode whole
    python -m benchmarks.purejaxrl --purejaxrl-dir ~/purejaxrl --agents 1 2 --iterations 10 \\
        --rounds 1 --configs cleanrl
    python -m benchmarks.purejaxrl --purejaxrl-dir ~/purejaxrl --agents 1 --cpus 1  # one core
    python -m benchmarks.purejaxrl --purejaxrl-dir ~/purejaxrl --mode whole --shims --out X.json

Output: --out (default results/benchmarks/purejaxrl_MODE_cpu.json, _gpu with a GPU) and the .md
beside it, rewritten after every run (files there this tool did not write are refused); each run's
output in --work-dir/logs/. Exit status: 0; 1 when a run failed (the others go on) or PureJaxRL
cannot be set up; 2 for bad input (one line, before anything is made); 130 when interrupted (what
was measured is kept).
"""

import argparse
import os
import shlex
import statistics
import sys
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Optional

from analysis.common import BadInput
from atomic import OutputRefused, check_inside, check_outputs, write_outputs
from benchmarks import purejaxrl_runs as runs
from benchmarks.busy_machine import rotated
from benchmarks.common import (
    ROOT,
    STEADY_FROM,
    Parser,
    gpus,
    human,
    interpreter_versions,
    machine,
    machine_text,
    run_recorded,
)
from benchmarks.purejaxrl_runs import OURS, PUREJAXRL, SETTINGS, Plan

TOOL = "benchmarks.purejaxrl"
# mode -> its default --iterations and --rounds: scaling's default runs in ~20 minutes on 2 cores
MODES = {"scaling": (10, 1), "whole": (100, 3)}
SIDES = (PUREJAXRL, *OURS)


# ------------------------------------------------------------------------------------- options
def parser() -> Parser:
    p = Parser(prog="python -m " + TOOL, description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--mode", choices=list(MODES), default="scaling")
    p.add_argument("--purejaxrl-dir", required=True, help="a PureJaxRL checkout (git)")
    p.add_argument("--agents", type=int, nargs="+", help="scaling: N (default: 1 4 16 64)")
    p.add_argument("--configs", nargs="+", choices=list(SETTINGS), help="scaling; default: both")
    p.add_argument("--scripts", nargs="+", choices=list(OURS), help="default: all (whole: linen)")
    (iterations, rounds), whole = MODES["scaling"], MODES["whole"]
    p.add_argument("--rounds", type=int, help=f"default: {rounds} scaling, {whole[1]} whole")
    iterations = f"per run (default: {iterations} scaling, {whole[0]} whole)"
    p.add_argument("--iterations", type=int, help=iterations)
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run at most")
    p.add_argument("--purejaxrl-python", help="an interpreter with PureJaxRL's packages (no venv)")
    shims = "PureJaxRL on this interpreter, our JAX, with benchmarks/purejaxrl_shims.py (no venv)"
    p.add_argument("--shims", action="store_true", help=shims)
    cpus = "pin the tool and every run to the first N cores it may use (taskset); default: all"
    p.add_argument("--cpus", type=int, metavar="N", help=cpus)
    p.add_argument(
        "--work-dir", default=str(ROOT / "runs" / "purejaxrl"), help="default: %(default)s"
    )
    fast_only = "scaling: ours only as a user trains (--no-sync-timing), no sync-timed run"
    p.add_argument("--fast-only", action="store_true", help=fast_only)
    p.add_argument("--out", help="JSON, the .md beside it (default: see above)")
    return p


def checked(opts: argparse.Namespace, gpu: bool) -> argparse.Namespace:
    """opts with the defaults of its mode settled; BadInput naming the bad value and what would
    do."""
    scaling = opts.mode == "scaling"
    for flag in ("agents", "configs", "fast_only"):
        if not scaling and getattr(opts, flag) not in (None, False):
            option = "--" + flag.replace("_", "-")
            raise BadInput(f"{option}: only with --mode scaling (--mode whole is one agent, ours)")
    iterations, rounds = MODES[opts.mode]
    opts.iterations = iterations if opts.iterations is None else opts.iterations
    opts.rounds = rounds if opts.rounds is None else opts.rounds
    if opts.rounds < 1:
        raise BadInput(f"--rounds {opts.rounds}: give 1 or more")
    opts.agents = list(dict.fromkeys(opts.agents or ([1, 4, 16, 64] if scaling else [1])))
    bad = [n for n in opts.agents if n < 1]
    if bad:
        raise BadInput(f"--agents {bad[0]}: give numbers of agents of 1 or more")
    least = STEADY_FROM + 2 if scaling else 1
    if opts.iterations < least:
        why = f" (our steady state is iterations {STEADY_FROM}+)" if scaling else ""
        raise BadInput(f"--iterations {opts.iterations}: give {least} or more{why}")
    if not opts.timeout > 0:
        raise BadInput(f"--timeout {opts.timeout}: give a positive number of seconds")
    if not Path(opts.purejaxrl_dir, runs.PPO).is_file():
        raise BadInput(f"--purejaxrl-dir {opts.purejaxrl_dir}: no {runs.PPO} in it")
    python = opts.purejaxrl_python
    if python and opts.shims:
        raise BadInput(f"--purejaxrl-python {python}: not with --shims (which runs on this one)")
    if python and not (Path(python).is_file() and os.access(python, os.X_OK)):
        raise BadInput(f"--purejaxrl-python {python}: no such executable")
    available = len(os.sched_getaffinity(0))
    if opts.cpus is not None and not 1 <= opts.cpus <= available:
        raise BadInput(f"--cpus {opts.cpus}: give 1 to {available}, the cores this process may use")
    opts.configs = list(dict.fromkeys(opts.configs or (list(SETTINGS) if scaling else ["ours"])))
    opts.scripts = list(dict.fromkeys(opts.scripts or (list(OURS) if scaling else ["linen"])))
    device = "gpu" if gpu else "cpu"
    opts.out = opts.out or str(
        ROOT / "results" / "benchmarks" / f"purejaxrl_{opts.mode}_{device}.json"
    )
    return opts


# -------------------------------------------------------------------------------- the rounds
def schedule(opts) -> list[tuple[int, str, int, str]]:
    """(round, configuration, agents, side) of every run: each cell's sides in an order rotating
    round by round, so that a slower spell of the machine falls on every side alike."""
    sides = [PUREJAXRL, *opts.scripts]
    cells = [(config, n) for config in opts.configs for n in opts.agents]
    return [
        (r, config, n, side)
        for r in range(opts.rounds)
        for config, n in cells
        for side in rotated(sides, r)
    ]


def outcome(result: dict) -> str:
    """A run's result in one line: its numbers, or why it failed and where its output is."""
    if "error" in result:
        return f"failed ({result['error'].splitlines()[0][:200]}; log {result['log']})"
    peak = result["peak_rss_bytes"]
    memory = "peak memory unknown" if peak is None else f"peak {peak / 2**20:.0f} MiB"
    if "steady_sps" in result:
        fast = ""
        if "fast_sps" in result:
            fast = f" (with --no-sync-timing, over whole iterations: {result['fast_sps']:.0f})"
        return f"steady {result['steady_sps']:.0f} agent-steps/s{fast}, {memory}"
    if "fast_sps" in result:
        fast = f"{result['fast_sps']:.0f} agent-steps/s over whole iterations"
        return f"with --no-sync-timing, {fast}, {memory}"
    return f"whole process {human(result['wall_s'])}, {memory}"


def run_rounds(opts, plan: Plan, record: dict) -> None:
    """Every run of the schedule, the record saved after each."""
    order = schedule(opts)
    whole = opts.mode == "whole"
    started = time.perf_counter()
    for done, (r, config, n, side) in enumerate(order, 1):
        print(f"[{done}/{len(order)}] round {r + 1}, {config} N={n}, {side}:", end=" ", flush=True)
        log_name = f"round{r + 1}-{config}-{n}-{side}.log"
        result = runs.run_one(plan, side, SETTINGS[config], n, log_name, whole)
        record["runs"].append(
            {"round": r + 1, "config": config, "agents": n, "side": side, **result}
        )
        record["rounds_done"] = r + (done % (len(order) // opts.rounds) == 0)
        write_outputs(TOOL, opts.out, record, markdown(record), opts.out)
        eta = (time.perf_counter() - started) / done * (len(order) - done)
        print(f"{outcome(result)} | ETA {human(eta)}", flush=True)


def new_record(opts, argv, plan: Plan, checkout: dict) -> dict:
    whole = opts.mode == "whole"
    n = opts.agents[0]
    timed = [] if plan.fast_only else opts.scripts
    commands = {
        f"{side} ({config}, N={n})": runs.command(
            plan, side, SETTINGS[config], n, Path("SCRATCH", "runs"), whole
        )
        for config in opts.configs
        for side in [PUREJAXRL, *timed]
    }
    if not whole:  # each template's scaling run is followed by its fast path's
        for config in opts.configs:
            for side in opts.scripts:
                commands[f"{side}, --no-sync-timing ({config}, N={n})"] = runs.command(
                    plan, side, SETTINGS[config], n, Path("SCRATCH", "runs"), fast=True
                )
    return {
        "command": shlex.join(["python", "-m", TOOL, *argv]),
        "status": "running",
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine(), "gpu": (gpus() or [None])[0]},
        "options": vars(opts),
        "settings": {name: vars(SETTINGS[name]) for name in opts.configs},
        "purejaxrl": {"dir": str(opts.purejaxrl_dir), **checkout},
        "versions": {
            PUREJAXRL: versions(plan.purejaxrl_python),
            "ours": versions(sys.executable),
        },
        "commands": commands,
        "rounds_done": 0,
        "runs": [],
    }


def versions(python) -> dict:
    return interpreter_versions(python, runs.PACKAGES, error=runs.SetupError)


def measure(opts, argv: list[str]) -> int:
    """Sets PureJaxRL's venv up, runs every round; the exit status."""
    if opts.cpus:
        # before the record reads the machine: its cores are then the pinned ones
        pin(opts.cpus)
    checkout = runs.checkout_commit(Path(opts.purejaxrl_dir))
    work = Path(opts.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if opts.shims:
        python = sys.executable
    else:
        python = opts.purejaxrl_python or str(runs.ensure_venv(work / "venv"))
    logs = work / "logs" / time.strftime("%Y%m%d-%H%M%S")
    # --work-dir is the user's (followed); no folder below it a link: the logs are written there
    check_inside(work, logs, "--work-dir").mkdir(parents=True)
    checkout_dir = Path(opts.purejaxrl_dir).resolve()
    plan = Plan(
        opts.iterations, opts.timeout, logs, python, checkout_dir, opts.shims, opts.fast_only
    )
    record = new_record(opts, argv, plan, checkout)
    print(sources_text(record), flush=True)
    print(f"results: {opts.out}; each run's output: {logs}", flush=True)
    if not run_recorded(TOOL, opts.out, record, markdown, partial(run_rounds, opts, plan, record)):
        return 130
    return 1 if any("error" in run for run in record["runs"]) else 0


def pin(count: int) -> None:
    """Pins this process to the first count cores it may use: every run it starts inherits them."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:count])


# ---------------------------------------------------------------------------------- the report
def medians(runs_done: list[dict], key: str) -> dict:
    """{(config, agents, side): (median of key, its count)} over the successful runs."""
    found: dict[tuple, list[float]] = {}
    for run in runs_done:
        if "error" not in run and run.get(key) is not None:
            found.setdefault((run["config"], run["agents"], run["side"]), []).append(run[key])
    return {cell: (statistics.median(values), len(values)) for cell, values in found.items()}


def cell_text(value: Optional[tuple], base: Optional[tuple], scale=1.0, digits=0) -> str:
    """`median (ratio to PureJaxRL's)`, the count when a round failed; '-' when none."""
    if value is None:
        return "-"
    median, count = value
    text = f"{median * scale:,.{digits}f}"
    # no ratio to a base of 0: a peak memory that the machine does not report (gVisor's /proc)
    if base is not None and base is not value and base[0]:
        text += f" ({median / base[0]:.2f}x)"
    return text


def scaling_tables(record: dict) -> str:
    """Agent-steps/s and peak memory per agent, a row per configuration and N."""
    opts = record["options"]
    sides = [PUREJAXRL, *opts["scripts"]]
    rate = medians(record["runs"], "steady_sps")
    fast = medians(record["runs"], "fast_sps")
    memory = medians(record["runs"], "peak_rss_bytes")
    head = "| configuration | N | " + " | ".join(sides) + " |\n|---|---:|" + "---:|" * len(sides)
    rate_rows, fast_rows, memory_rows = [], [], []
    for config in opts["configs"]:
        for n in opts["agents"]:
            cells = [(config, n, side) for side in sides]
            base_rate, base_memory = rate.get(cells[0]), memory.get(cells[0])
            rates = [cell_text(rate.get(c), base_rate) for c in cells]
            fasts = [cell_text(base_rate, None)] + [
                cell_text(fast.get(c), base_rate) for c in cells[1:]
            ]
            per_agent = [cell_text(memory.get(c), base_memory, 1 / 2**20 / n, 1) for c in cells]
            rate_rows.append(f"| {config} | {n} | " + " | ".join(rates) + " |")
            fast_rows.append(f"| {config} | {n} | " + " | ".join(fasts) + " |")
            memory_rows.append(f"| {config} | {n} | " + " | ".join(per_agent) + " |")
    return (
        "Steady agent-steps per second (medians; in brackets: over PureJaxRL's, above 1 faster)"
        f"\n\n{head}\n" + "\n".join(rate_rows) + "\n\nAs a user trains: ours with "
        "--no-sync-timing, agent-steps per second over whole iterations, writing included "
        "(medians; PureJaxRL's: its steady rate, as above; in brackets: over it)\n\n"
        f"{head}\n" + "\n".join(fast_rows) + "\n\nPeak memory per agent, MiB (the process's "
        "peak resident set over N; in brackets: over PureJaxRL's, above 1 more)\n\n"
        f"{head}\n" + "\n".join(memory_rows)
    )


def scaling_goal(record: dict) -> str:
    """The target: each JAX template at least PureJaxRL's agent-steps/s at the same N and
    configuration, ours over whole iterations with --no-sync-timing where measured (fast_sps),
    else steady."""
    rate = {**medians(record["runs"], "steady_sps"), **medians(record["runs"], "fast_sps")}
    lines = []
    for script in record["options"]["scripts"]:
        pairs = [
            (cell, rate[cell], rate.get((cell[0], cell[1], PUREJAXRL)))
            for cell in rate
            if cell[2] == script
        ]
        measured = [(cell, ours, theirs) for cell, ours, theirs in pairs if theirs is not None]
        if not measured:
            lines.append(f"- {script}: not measured.")
            continue
        behind = [f"{c[0]} N={c[1]} ({o[0] / t[0]:.2f}x)" for c, o, t in measured if o[0] < t[0]]
        verdict = "met" if not behind else "not met at " + ", ".join(behind)
        lines.append(f"- {script}: {verdict} ({len(measured)} cells measured).")
    target = "Target: each JAX template at least PureJaxRL's agent-steps/s at the same N"
    ours = "ours over whole iterations with --no-sync-timing where measured, else steady"
    return f"{target} and configuration ({ours}).\n\n" + "\n".join(lines)


WHOLE_KEYS = (
    ("wall_s", "whole process, s", 1, 1),
    ("peak_rss_bytes", "peak memory, MiB", 2**-20, 0),
)
WHOLE_PARTS = (
    ("import_s", "imports, s"),
    ("setup_s", "start to iteration 0, s"),
    ("iter0_s", "iteration 0 (its compile), s"),
    ("compile_s", "compile, s"),
)


def whole_table(record: dict) -> str:
    """Wall time and peak memory of each side's whole process, their ratios, and the parts."""
    opts = record["options"]
    sides = [PUREJAXRL, *opts["scripts"]]
    head = "| | " + " | ".join(sides) + " |\n|---|" + "---:|" * len(sides)
    rows = []
    for key, label, scale, digits in WHOLE_KEYS:
        found = medians(record["runs"], key)
        values = [found.get(("ours", 1, side)) for side in sides]
        cells = [cell_text(v, values[0], scale, digits) for v in values]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    for key, label in WHOLE_PARTS:
        found = medians(record["runs"], key)
        cells = [cell_text(found.get(("ours", 1, side)), None, 1, 2) for side in sides]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    wall = medians(record["runs"], "wall_s")
    spread = ", ".join(
        f"{side} {min_max(record['runs'], side)}" for side in sides if ("ours", 1, side) in wall
    )
    return f"{head}\n" + "\n".join(rows) + f"\n\nWhole process, min-max over rounds: {spread}."


def min_max(runs_done: list[dict], side: str) -> str:
    walls = [run["wall_s"] for run in runs_done if run["side"] == side and "error" not in run]
    return f"{min(walls):.1f}-{max(walls):.1f} s"


def whole_goal(record: dict) -> str:
    wall = medians(record["runs"], "wall_s")
    theirs, ours = wall.get(("ours", 1, PUREJAXRL)), wall.get(("ours", 1, "linen"))
    goal = "Target: ppo_linen.py's whole process within 1.05x of PureJaxRL's"
    if theirs is None or ours is None:
        return f"{goal}: not measured."
    ratio = ours[0] / theirs[0]
    return f"{goal}: {'met' if ratio <= 1.05 else 'not met'} ({ratio:.2f}x)."


METHOD = {
    "scaling": f"""Steady agent-steps/s: N x (one agent's envs x steps) per second of training,
compile and warm-up left out on both sides. Ours: sync timing on, the mean time/iteration over
iterations {STEADY_FROM}+ (0-based: rollout, update and the one transfer of the metrics to the
host, TensorBoard's writing left out: the study's measure); the loop's rate with the writing
included is in the JSON as loop_sps. PureJaxRL: its whole train is one XLA program (a scan over the
iterations, no host in the loop), so it is compiled ahead of time (`lower().compile()`, timed apart
as compile_s), run once as a warm-up, then run again and timed to its end (block_until_ready):
every iteration of that run is a steady one, the same count as ours runs in all. As a user trains:
each of our runs is followed by the same with --no-sync-timing (the fast path: many iterations a
device call), whose rate counts iterations 1+ over time/elapsed from the end of iteration 0 (a call
of its own: the compile) to the end of the last: the calls, their transfers and the writing. Peak
memory: the process's peak resident set (its VmHWM, read while it runs).""",
    "whole": """Whole process: each side a fresh process, from its start to its exit, timed by
this tool: imports, set-up, compile and every iteration. Ours: `ppo_linen.py --env CartPole-v1
--no-sync-timing` (TensorBoard's events and the progress lines included); PureJaxRL:
`jax.jit(make_train(config))(key)` with its DEBUG callback off, its metrics fetched to the host.
Peak memory: the child's own peak resident set (its VmHWM). imports: from the process's first line
to the end of its imports (ours: summary.json's import_s; PureJaxRL: jax and ppo.py imported);
start to iteration 0: to the start of the first iteration (ours: setup_s; PureJaxRL: its imports
and its one compile); iteration 0: our first iteration (its rollout's and update's compiles);
compile: PureJaxRL's whole train compiled as one program (lower().compile(), then run).""",
}


def markdown(record: dict) -> str:
    """The .md beside the JSON: the tables, the target, how it was measured, PureJaxRL's commit,
    the versions and the commands (paths inside the project relative to it)."""
    r, opts = record, record["options"]
    box = r["machine"]
    gpu = f"; GPU: {box['gpu']}" if box.get("gpu") else "; no GPU"
    pinned = ""
    if opts.get("cpus"):
        pinned = f"; the tool and every run pinned to {opts['cpus']} of them (--cpus)"
    mode = opts["mode"]
    if mode == "scaling":
        tables, goal = scaling_tables(r), scaling_goal(r)
    else:
        tables, goal = whole_table(r), whole_goal(r)
    commands = "\n".join(
        f"- {name}: `{shlex.join(cmd).replace(f'{ROOT}/', '')}`"
        for name, cmd in r["commands"].items()
    )
    return f"""# PureJaxRL side by side ({mode}): CartPole-v1

Medians of {r["rounds_done"]} rounds (of {opts["rounds"]}; status {r["status"]}),
{opts["iterations"]} iterations a run, on {machine_text(box)}{gpu}{pinned}; started {r["started"]}
(UTC). Made by `{r["command"]}`.

{tables}

{goal}

{METHOD[mode]} Every run is a fresh process with no JAX compilation cache; the sides alternate in
an order rotating round by round.

{sources_text(r)}

Commands (SCRATCH: the run's own temporary folder):

{commands}
"""


def sources_text(record: dict) -> str:
    """PureJaxRL's checkout and each side's versions: in the .md and before the first run."""
    source, versions = record["purejaxrl"], record["versions"]
    modified = " (its purejaxrl/ differs from that commit)" if source["modified"] else ""
    if source["modified"] is None:
        modified = " (whether its purejaxrl/ differs from that commit is unknown: no git there)"
    where = "PureJaxRL's venv"
    if record["options"].get("shims"):
        where = "PureJaxRL on our interpreter, with benchmarks/purejaxrl_shims.py's stand-ins"
    return f"""PureJaxRL: its purejaxrl/ppo.py at `{source["commit"]}`{modified}, run as it is by
benchmarks/purejaxrl_train.py. Versions. {where}: {versions_text(versions[PUREJAXRL])}.
Ours: {versions_text(versions["ours"])}."""


def versions_text(versions: dict) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = checked(parser().parse_args(argv), bool(gpus()))
        check_outputs(TOOL, opts.out)
    except (BadInput, OutputRefused) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        return measure(opts, argv)
    except runs.SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted before the first run", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

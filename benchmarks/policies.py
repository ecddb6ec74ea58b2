"""Kept policies across frameworks: each run's policy (--save-model) evaluated in the four
frameworks' networks, with a replay video of each and the Hub folder of one (issue 55's edition
results/policies-cpu/).

    python -m benchmarks.policies RUNS_DIR --out DIR

For each run folder under RUNS_DIR that holds a model.safetensors (one per framework that trained
it, all of one env): evaluate.py's prepare and evaluate in each of the four frameworks (EPISODES
episodes, seed SEED, deterministic actions), each result in the run's eval.json as evaluate.py keeps
it; then `evaluate.py RUN --video DIR/videos/FRAMEWORK.mp4` in its own framework, in a fresh
process, and for one policy (Linen's) `--hub-folder DIR/hub-FRAMEWORK` too (evaluation/hub.py: a
fixed list of files, what a reader needs of the run). DIR/README.md gets the table of mean ±
std returns (rows: trained by; columns: evaluated in), each checkpoint's size, the machine and the
commands; DIR/policies.json the same as data.

Bad input (no checkpoint, two of one framework, checkpoints of several envs, an output it did not
write: README.md, policies.json, a video, the Hub folder, a run's eval.json; a symbolic link below
DIR on the way to an output): one line, exit code 2, before anything is evaluated or written. DIR
itself is followed as named; nothing is written through a link below it (atomic.write_file).
"""

import argparse
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple, Optional

import pandas as pd

import atomic
import checkpoint
import evaluate
from analysis.common import md_code, md_text
from analysis.markdown import markdown_table
from benchmarks.common import ROOT, machine, machine_text, refuse
from core.shell_quoting import shell_word
from evaluation import model_file
from evaluation.share import FRAMEWORK_NAMES

TOOL = "benchmarks.policies"
EPISODES, SEED = 10, 1
HUB_FRAMEWORK = (
    "linen"  # the policy whose Hub folder is built (the first one found when there is none)
)
README, RECORD = "README.md", "policies.json"
FRAMEWORKS = evaluate.FRAMEWORKS
NO_RESULT = "–"


class Policy(NamedTuple):
    framework: str  # the one that trained it
    run_dir: Path
    ckpt: model_file.Checkpoint


class Outputs(NamedTuple):
    """Where each file goes: the README and record in DIR, a video per policy, one Hub folder."""

    out: Path  # DIR, as the user named it
    readme: Path
    record: Path
    videos: dict  # framework that trained it -> DIR/videos/FRAMEWORK.mp4
    hub_framework: str
    hub: Path


# ------------------------------------------------------------------------------------- the policies
def find_policies(runs_dir: Path) -> list[Policy]:
    """The checkpoints under runs_dir, in FRAMEWORKS' order; ValueError (one line) for none, a
    checkpoint that does not load, two of one framework (one row each) or checkpoints of several
    envs."""
    if not runs_dir.is_dir():
        raise ValueError(f"RUNS_DIR {runs_dir} is not a folder")
    policies = {}
    for path in sorted(runs_dir.rglob(checkpoint.FILENAME)):
        ckpt = model_file.load(path)
        framework = ckpt.meta["framework"]
        if framework in policies:
            first = policies[framework].run_dir
            raise ValueError(
                f"RUNS_DIR {runs_dir} holds two {framework} policies ({first} and {path.parent}): "
                "one row per "
                "framework, give a folder with one of each"
            )
        policies[framework] = Policy(framework, path.parent, ckpt)
    if not policies:
        raise ValueError(
            f"RUNS_DIR {runs_dir} holds no {checkpoint.FILENAME} (ppo_*.py --save-model writes it)"
        )
    envs = sorted({env_of(p) for p in policies.values()})
    if len(envs) > 1:
        raise ValueError(
            f"RUNS_DIR {runs_dir} holds policies of several envs ({', '.join(envs)}): give one "
            "env's"
        )
    return [policies[f] for f in FRAMEWORKS if f in policies]


def env_of(policy: Policy) -> str:
    return f"{policy.ckpt.meta['env']}@{policy.ckpt.meta['env_backend']}"


def outputs_of(out: Path, policies: list[Policy]) -> Outputs:
    frameworks = [p.framework for p in policies]
    hub_framework = HUB_FRAMEWORK if HUB_FRAMEWORK in frameworks else frameworks[0]
    videos = {f: out / "videos" / f"{f}.mp4" for f in frameworks}
    hub = out / f"hub-{hub_framework}"
    return Outputs(out, out / README, out / RECORD, videos, hub_framework, hub)


def check_outputs(outputs: Outputs, policies: list[Policy]) -> None:
    """OutputRefused (one line) for an output this tool (or evaluate.py, for the videos, the Hub
    folder and the eval.json files) did not write, or cannot write."""
    from evaluation import hub, video

    # no link below DIR on the way to any output (evaluate.py, which writes the videos and the Hub
    # folder, follows the path it is given)
    for path in (outputs.readme, outputs.record, *outputs.videos.values(), outputs.hub):
        atomic.check_inside(outputs.out, path, "--out")
    atomic.check_replaceable("--out", outputs.readme, atomic.md_by(TOOL))
    atomic.check_record(TOOL, outputs.record)
    for policy in policies:
        evaluate.check_eval_file(policy.run_dir / evaluate.EVAL_FILE)
        video.check(str(outputs.videos[policy.framework]), policy.ckpt.meta)
    hub.check_hub_folder(outputs.hub)


# ---------------------------------------------------------------------------------- the evaluations
def evaluate_everywhere(policies: list[Policy]) -> list[dict]:
    """Each policy in each framework's network, by evaluate.py's functions; each result also in its
    run's eval.json (evaluate.py's merged record). Progress lines as it goes."""
    results = []
    count = len(policies) * len(FRAMEWORKS)
    for policy in policies:
        eval_path = policy.run_dir / evaluate.EVAL_FILE
        for framework in FRAMEWORKS:
            print(
                f"[{len(results) + 1}/{count}] {policy.framework}'s policy in {framework} ...",
                flush=True,
            )
            setup = evaluate.prepare(policy.ckpt, framework, EPISODES, SEED, stochastic=False)
            result = evaluate.evaluate(setup, SEED).result
            record = evaluate.merged_record(eval_path, result)
            atomic.write_json(eval_path, record, given=policy.run_dir)
            print(f"    {evaluate.summary(result)}", flush=True)
            results.append(result)
    return results


def extras_commands(policies: list[Policy], outputs: Outputs) -> list[list[str]]:
    """evaluate.py's commands for the videos (each in its own framework) and the Hub folder."""
    commands = []
    for policy in policies:
        command = [
            "evaluate.py",
            str(policy.run_dir),
            "--episodes",
            str(EPISODES),
            "--seed",
            str(SEED),
        ]
        command += ["--video", str(outputs.videos[policy.framework])]
        if policy.framework == outputs.hub_framework:
            command += ["--hub-folder", str(outputs.hub)]
        commands.append(command)
    return commands


def run_extras(commands: list[list[str]]) -> None:
    """Each command in a fresh process (its output passed on); RuntimeError when one fails."""
    for i, command in enumerate(commands, 1):
        print(f"[video {i}/{len(commands)}] python {shown(command)}", flush=True)
        script = [str(ROOT / command[0]), *command[1:]]
        if subprocess.run([sys.executable, *script]).returncode != 0:
            raise RuntimeError(f"python {shown(command)} failed")


def project_relative(command: list[str]) -> list[str]:
    """A run's command (its sys.argv) with its script as a path from the project's folder, when it
    is in it."""
    script = Path(command[0])
    if script.is_absolute() and script.is_relative_to(ROOT):
        return [script.relative_to(ROOT).as_posix(), *command[1:]]
    return command


def shown(command: list[str]) -> str:
    return " ".join(shell_word(word) for word in command)


# --------------------------------------------------------------------------------------- the tables
def cell(result: Optional[dict]) -> str:
    if result is None:
        return NO_RESULT
    return f"{result['mean_return']:.1f} ± {result['std_return']:.1f}"


def returns_table(results: list[dict]) -> str:
    """Mean ± std return: a row per framework that trained a policy, a column per framework that ran
    it."""
    by_pair = {(r["trained_by"], r["framework"]): r for r in results}
    trained = [f for f in FRAMEWORKS if any(t == f for t, _ in by_pair)]
    rows = [
        {"trained by ↓ evaluated in →": FRAMEWORK_NAMES[t]}
        | {FRAMEWORK_NAMES[f]: cell(by_pair.get((t, f))) for f in FRAMEWORKS}
        for t in trained
    ]
    return markdown_table(pd.DataFrame(rows))


def names(frameworks: list[str]) -> str:
    """The frameworks' names as a list in words: "A", "A and B", "A, B and C"."""
    named = [FRAMEWORK_NAMES[f] for f in frameworks]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"


def agreement(results: list[dict]) -> str:
    """Which frameworks' networks give every policy the same returns, episode by episode (the
    largest such group), and how far the others' mean returns are from theirs."""
    columns = {}  # evaluated in -> trained by -> result
    for r in results:
        columns.setdefault(r["framework"], {})[r["trained_by"]] = r
    groups = {}  # every policy's returns -> the frameworks that gave them
    for framework in [f for f in FRAMEWORKS if f in columns]:
        key = tuple(sorted((t, tuple(r["returns"])) for t, r in columns[framework].items()))
        groups.setdefault(key, []).append(framework)
    if len(groups) == 1:
        return f"{names(columns)} give each policy the same returns, episode by episode"
    agreeing = max(groups.values(), key=len)
    others = [f for f in columns if f not in agreeing]
    reference = columns[agreeing[0]]
    gap = max(
        abs(r["mean_return"] - reference[t]["mean_return"])
        for f in others
        for t, r in columns[f].items()
        if t in reference
    )
    if len(agreeing) == 1:
        same = "No two frameworks give a policy the same returns"
        return f"{same}; their means differ by at most {gap:.3g}"
    return (
        f"{names(agreeing)} give each policy the same returns, episode by episode; {names(others)} "
        f"{'differs' if len(others) == 1 else 'differ'} from them by at most {gap:.3g} in the mean"
    )


def reading(results: list[dict]) -> str:
    """One line: where the frameworks agree on a policy's returns, and the policies' own returns."""
    own = {r["trained_by"]: r["mean_return"] for r in results if r["trained_by"] == r["framework"]}
    if not own:
        return f"{agreement(results)}."
    low, high = min(own, key=own.get), max(own, key=own.get)
    if low == high:
        return f"{agreement(results)}; in its own framework the policy returns {own[low]:.1f}."
    return (
        f"{agreement(results)}; in their own frameworks the policies return from {own[low]:.1f} "
        f"({FRAMEWORK_NAMES[low]}) to {own[high]:.1f} ({FRAMEWORK_NAMES[high]})."
    )


def policy_rows(policies: list[dict], out: Path) -> str:
    """The policies: run, iterations, last training return, checkpoint size, replay video."""
    rows = [
        {
            "trained by": FRAMEWORK_NAMES[p["framework"]],
            "run": p["run"],
            "iterations": p["iteration"],
            "last training return": NO_RESULT
            if p["final_return"] is None
            else round(p["final_return"]),
            f"{checkpoint.FILENAME} (bytes)": f"{p['checkpoint_bytes']:,}",
            "replay": f"[{Path(p['video']).name}]({Path(p['video']).relative_to(out).as_posix()})",
        }
        for p in policies
    ]
    return markdown_table(pd.DataFrame(rows))


def policy_record(policy: Policy, runs_dir: Path, outputs: Outputs) -> dict:
    meta = policy.ckpt.meta
    return {
        "framework": policy.framework,
        "run": policy.run_dir.relative_to(runs_dir).as_posix(),
        "iteration": meta["iteration"],
        "final_return": meta["final_return"],
        "checkpoint_bytes": (policy.run_dir / checkpoint.FILENAME).stat().st_size,
        "training_command": meta["command"],
        "video": str(outputs.videos[policy.framework]),
    }


def versions_of(runs: list[Path]) -> dict:
    """The package versions the runs' config.json record (bookkeeping's), merged; a config.json
    that cannot be read (atomic.read_json) or holds no object of versions adds none."""
    versions = {}
    for run in runs:
        try:
            config = atomic.read_json(run / "config.json")
            versions |= atomic.field(config, "versions", dict, str(run / "config.json"), {})
        except (OSError, ValueError):
            continue
    return versions


def readme_text(record: dict, out: Path) -> str:
    """DIR/README.md from the record."""
    machine_info, env = record["machine"], record["env"]
    packages = {
        name: v for name, v in record["versions"].items() if name != "python"
    }  # Python: the machine's
    versions = ", ".join(f"{name} {version}" for name, version in packages.items())
    training = "\n".join(
        f"    python {shown(project_relative(p['training_command']))}" for p in record["policies"]
    )
    extras = "\n".join(f"    python {shown(c)}" for c in record["extras_commands"])
    hub = Path(record["hub_folder"]).relative_to(out).as_posix()
    return f"""# Kept policies: {md_text(env)}, each framework's, evaluated in all four

Each framework's policy, kept by its template's `--save-model` (`model.safetensors`: one layout \
for the
four frameworks), evaluated by evaluate.py in each framework's own network: {record["episodes"]} \
episodes,
seed {record["seed"]}, deterministic actions, on the env, backend and observation normalisation of \
its
training. Cells: mean ± std (population) of the episode returns; each run's `eval.json` holds \
every episode's.

{returns_table(record["evaluations"])}

{reading(record["evaluations"])}

{policy_rows(record["policies"], out)}

Replays: each policy in its own framework (`evaluate.py --video`; an envpool MuJoCo episode is \
replayed
in gymnasium's MuJoCo of the same model, so its return can differ from episode 0's).
Hub folder: [{hub}/]({hub}/README.md), {FRAMEWORK_NAMES[record["hub_framework"]]}'s policy, ready \
for
`huggingface-cli upload` (`evaluate.py --hub-folder`).

Machine: {machine_text(machine_info)}, {md_text(machine_info["os"])}, host
{md_code(machine_info["hostname"])}; Python {machine_info["python"]}; the runs' packages:
{md_text(versions or "not recorded")}. Evaluated on {record["date"]} (UTC).

## Commands

The runs (each one's command, from its checkpoint's metadata):

{training}

The evaluation: `python -m {TOOL} {md_text(record["runs_dir"])} --out {md_text(out)}`, which runs
evaluate.py's prepare and evaluate for each policy in each framework (as `python evaluate.py RUN \
--framework
FRAMEWORK --episodes {record["episodes"]} --seed {record["seed"]}` does), then:

{extras}
"""


# --------------------------------------------------------------------------------------------- main
def write_outputs(outputs: Outputs, record: dict, readme: str) -> None:
    """policies.json and README.md in DIR, each marked as this tool's; DIR as named is followed,
    nothing below it (checked before anything ran, checked again)."""
    atomic.check_inside(outputs.out, outputs.record, "--out").parent.mkdir(
        parents=True, exist_ok=True
    )
    atomic.write_json(outputs.record, {atomic.WRITTEN_BY: TOOL, **record}, given=outputs.out)
    atomic.write_file(outputs.readme, f"{atomic.md_mark(TOOL)}\n{readme}", given=outputs.out)


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs_dir", type=Path, metavar="RUNS_DIR", help="a folder of run folders (bench.sh's)"
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="the edition's folder: README.md, videos/, hub-*/"
    )
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    opts = parse_args(argv)
    try:  # everything checked before anything is evaluated or written
        policies = find_policies(opts.runs_dir)
        outputs = outputs_of(opts.out, policies)
        check_outputs(outputs, policies)
    except ValueError as e:  # BadCheckpoint, OutputRefused, video.CannotRecord among them
        refuse(e)
    results = evaluate_everywhere(policies)
    commands = extras_commands(policies, outputs)
    run_extras(commands)
    record = {
        "env": env_of(policies[0]),
        "episodes": EPISODES,
        "seed": SEED,
        "runs_dir": str(opts.runs_dir),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": machine(),
        "versions": versions_of([p.run_dir for p in policies]),
        "policies": [policy_record(p, opts.runs_dir, outputs) for p in policies],
        "evaluations": results,
        "extras_commands": commands,
        "hub_framework": outputs.hub_framework,
        "hub_folder": str(outputs.hub),
    }
    write_outputs(outputs, record, readme_text(record, opts.out))
    print(f"{outputs.readme}: {len(results)} evaluations of {len(policies)} policies", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

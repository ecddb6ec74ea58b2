"""bench.sh and python -m sweep as the tests run them (bench, run_bench, dry_run, planned,
done_lines, plan_rows), what their command lines say (option, framework_of, env_of, cell_of), a
study with more in it (other_study), the stand-in framework "fake" (FAKE_SCRIPT, fake_env, marks), a
sweep's run folders made without running them (fake_run), env timing files, and one-line
refusals."""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from core import study
from helpers import ROOT, STUDY, SWEEP_MODULE, one_cell


def bench(*args: str, timeout: float = 60, env: dict | None = None, python: str = sys.executable):
    cmd = ["bash", str(ROOT / "bench.sh"), "--python", python, *args]
    full_env = {**os.environ, "WANDB_MODE": "disabled", **(env or {})}
    return subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=full_env
    )


def dry_run(tmp_path: Path, *args: str, env: dict | None = None) -> list[str]:
    """The command lines of a dry run (into an empty log dir); checks the count line."""
    proc = bench("--dry-run", "--log-dir", str(tmp_path / "runs"), *args, env=env)
    assert proc.returncode == 0, proc.stderr
    *lines, count_line = proc.stdout.splitlines()
    assert re.match(rf"dry run: {len(lines)} runs \(0 already completed\)", count_line), count_line
    return lines


def option(line: str, name: str) -> str:
    return line.split(f" {name} ")[1].split()[0]


def framework_of(line: str, study=STUDY) -> str:
    script = Path(shlex.split(line)[1]).name
    return next(name for name, fw in study.frameworks.items() if Path(fw.script).name == script)


def env_of(line: str) -> str:
    """The env label of a command line: its --env, with "@envpool" when it runs on envpool
    (--env-backend)."""
    backend = option(line, "--env-backend") if " --env-backend " in line else "gymnax"
    return study.env_label(option(line, "--env"), backend)


def cell_of(line: str) -> tuple:
    """(experiment, seed, env label, model size, agents per process) of a command line; the
    experiment is its log dir's name."""
    return (
        Path(option(line, "--log-dir")).name,
        option(line, "--seed"),
        env_of(line),
        option(line, "--model-size"),
        option(line, "--num-agents") if " --num-agents " in line else "1",
    )


def last_line(proc) -> str:
    return proc.stdout.strip().splitlines()[-1]


def other_study(tmp_path: Path, extra_toml: str) -> dict:
    """The env of a process that reads study.toml plus `extra_toml` (through $BENCHBACK_STUDY)."""
    path = tmp_path / "study.toml"
    path.write_text((ROOT / "study.toml").read_text() + "\n" + extra_toml)
    return {"BENCHBACK_STUDY": str(path)}


def plan_rows(plan: str) -> list[list[str]]:
    """python -m sweep plan's runs: [state, description, log stem, *command] each (NUL-separated
    fields after a 5-field header; a run's command is preceded by its cell's id and its length)."""
    fields = plan.split("\0")
    assert fields[-1] == "" and len(fields) >= 6, plan[:200]
    fields, rows, i = fields[:-1], [], 5
    while i < len(fields):
        n = int(fields[i + 4])
        rows.append([*fields[i : i + 3], *fields[i + 5 : i + 5 + n]])
        i += 5 + n
    assert i == len(fields)
    return rows


def linen_small_plan(tmp_path: Path, experiments: str) -> list[list[str]]:
    """plan_rows of python -m sweep plan for linen, small, seed 1 of some experiments."""
    proc = subprocess.run(
        [
            sys.executable,
            *SWEEP_MODULE,
            "plan",
            *("--experiments", experiments, "--frameworks", "linen", "--sizes", "small"),
            *("--seeds", "1", "--log-dir", str(tmp_path)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return plan_rows(proc.stdout)


def planned(
    log_dir: Path, exp: str = "exp2", env: str = "CartPole-v1", *args: str
) -> list[list[str]]:
    """The commands (python dropped) of a linen dry run of one env, small, seed 1."""
    proc = bench(
        "--dry-run",
        "--log-dir",
        str(log_dir),
        *one_cell(exp, env),
        *args,
    )
    assert proc.returncode == 0, proc.stderr
    return [
        shlex.split(line.removeprefix("# done: "))[1:] for line in proc.stdout.splitlines()[:-1]
    ]


# the config.json fields a fake run takes from its command, as the scripts write them (runlog checks
# that they agree)
COMMAND_FIELDS = {"env": str, "env_backend": str, "model_size": str, "compile": str, "seed": int}
COMMAND_FIELDS |= {"dtype": str, "sync_timing": bool, "num_iterations": int, "tag": str}


def fake_run(
    log_dir: Path,
    exp: str,
    status: str,
    command: list[str] | None,
    name: str,
    iterations: int | None = None,
) -> Path:
    """A run folder like the scripts write it, without running it: config.json (its "command" =
    sys.argv, and the fields the command sets; the framework of its script), summary.json and one
    TensorBoard events file with a time/iteration per iteration (a usable run when completed).
    iterations: the command's --num-iterations, else 2."""
    from tensorboardX import SummaryWriter

    from core import run_args

    run_dir = log_dir / exp / name
    run_dir.mkdir(parents=True)
    # a config.json the study knows, with the host and start time that tie the events file to it
    # (runlog)
    config = dict(
        env="CartPole-v1",
        framework="linen",
        model_size="small",
        compile="jit",
        seed=1,
        sync_timing=False,
    )
    config.update(batch_size=1, num_iterations=2, hostname=socket.gethostname())
    # before the events are written
    config.update(start_time=datetime.now(timezone.utc).isoformat())
    if command is not None:
        config["command"] = command
        scripts = {Path(fw.script).name: name for name, fw in STUDY.frameworks.items()}
        config["framework"] = scripts.get(Path(command[0]).name, "linen")
        given = run_args.flags(command)
        config |= {key: kind(given[key]) for key, kind in COMMAND_FIELDS.items() if key in given}
    config["num_iterations"] = iterations = iterations or config["num_iterations"]
    (run_dir / "config.json").write_text(json.dumps(config))
    # the events within it
    summary = {
        "status": status,
        "iterations_completed": iterations,
        "total_s": 0.5 + 0.1 * iterations,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary))
    with SummaryWriter(str(run_dir)) as writer:
        for iteration in range(iterations):
            writer.add_scalar("time/iteration", 0.1, iteration + 1)
    return run_dir


def done_lines(log_dir: Path, *args: str, exp: str = "exp2", env: str = "CartPole-v1") -> list[str]:
    proc = bench(
        "--dry-run",
        "--log-dir",
        str(log_dir),
        *one_cell(exp, env),
        *args,
    )
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line.startswith("# done: ")]


def timing_file(path: Path, hostname: str, device: str, envs=("CartPole-v1",)) -> Path:
    path.write_text(
        json.dumps(
            {
                "hostname": hostname,
                "device": device,
                "num_envs": 4096,
                "envs": {env: {"ms_per_step": 1.0, "ratio": 1.0} for env in envs},
            }
        )
    )
    return path


# A stand-in interpreter: notes the env timing's and each run's arguments in $MARKS, runs nothing of
# them.
NOTING_PYTHON = """#!/usr/bin/env bash
case ${1:-} in
  */ppo_*.py) echo "$*" >> "$MARKS" ;;
  -m) if [[ $2 == sweep.env_timing ]]; then echo "$*" >> "$MARKS"
      else exec "$REAL_PYTHON" "$@"; fi ;;
  *) exec "$REAL_PYTHON" "$@" ;;
esac
"""


# A stand-in ppo script: notes {"pid", "argv"} in $FAKE_MARKS, writes config.json (its "command" =
# sys.argv) and, when it completes, a usable run (runlog.is_completed). $FAKE_HOLD: run while that
# file exists. SIGINT or SIGTERM: an "interrupted" summary and exit 130, like the real scripts,
# unless $FAKE_LINGER: then it ignores the SIGTERM and outlives any grace.
FAKE_SCRIPT = """
import datetime, json, os, signal, socket, sys, time
from pathlib import Path

# a run, not a module: bench.sh's check of the run arguments (which imports each script) finds no
# Args
if __name__ != "__main__":
    raise ImportError("a stand-in script: run it")

# held until the handlers are set, as the real scripts do from their first line: a signal that lands
# just after the mark still ends in an "interrupted" summary
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT, signal.SIGTERM])
sys.path.insert(0, {root!r})
from core import runlog

def arg(name):  # --name VALUE or --name=VALUE
    for word, after in zip(sys.argv, sys.argv[1:] + [None]):
        if word == name or word.startswith(name + "="):
            return after if word == name else word[len(name) + 1 :]

with open(os.environ["FAKE_MARKS"], "a") as f:
    f.write(json.dumps({{"pid": os.getpid(), "argv": sys.argv}}) + "\\n")
run_dir = Path(arg("--log-dir")) / f"fake__{{arg('--seed')}}__{{os.getpid()}}"
run_dir.mkdir(parents=True)
config = {{key: None for key in runlog.REQUIRED_CONFIG}}
start = time.time()
config.update(
    command=sys.argv,
    framework="fake",
    seed=int(arg("--seed")),
    num_iterations=1,
    env=arg("--env"),
    model_size=arg("--model-size"),
    compile=arg("--compile"),
    sync_timing="--no-sync-timing" not in sys.argv,
    batch_size=1,
    hostname=socket.gethostname(),
    start_time=datetime.datetime.fromtimestamp(start).astimezone().isoformat(),
)
(run_dir / "config.json").write_text(json.dumps(config))

def summary(status):
    # the iteration's 0.1 s, and the events written within the run
    total = max(time.time() - start, 0.2)
    summary = {{"status": status, "iterations_completed": 1, "total_s": total}}
    (run_dir / "summary.json").write_text(json.dumps(summary))

def stop(signum, frame):
    summary("interrupted")
    if os.environ.get("FAKE_LINGER"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(120)
    sys.exit(130)

signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT, signal.SIGTERM])
hold = os.environ.get("FAKE_HOLD")
while hold and os.path.exists(hold):
    time.sleep(0.02)
from tensorboardX import SummaryWriter

with SummaryWriter(str(run_dir)) as writer:
    writer.add_scalar("time/iteration", 0.1, 1)
summary("completed")
"""
# One run per seed: the fake framework has one compile mode
FAKE_SWEEP = [
    "--experiments",
    "exp1",
    "--frameworks",
    "fake",
    "--envs",
    "CartPole-v1",
    "--sizes",
    "small",
    "--no-env-timing",
]


def fake_env(tmp_path) -> dict:
    """The environment of a bench.sh whose study has the stand-in framework "fake"; its marks in
    tmp_path/marks."""
    script = tmp_path / "ppo_fake.py"
    script.write_text(FAKE_SCRIPT.format(root=str(ROOT)))
    study_env = other_study(
        tmp_path,
        f'[frameworks.fake]\nscript = "{script.name}"\ncompile = ["fast"]\ncolor = "#000"\n',
    )
    return {
        **os.environ,
        "WANDB_MODE": "disabled",
        **study_env,
        "FAKE_MARKS": str(tmp_path / "marks"),
    }


def marks(tmp_path: Path) -> list[dict]:
    path = tmp_path / "marks"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def bench_cmd(*args: str) -> list[str]:
    return ["bash", str(ROOT / "bench.sh"), "--python", sys.executable, *args]


def run_bench(
    *args: str, env: dict, cwd: Path = ROOT, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        bench_cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


def one_line_refusal(proc, *words: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert all(word in proc.stderr for word in words), proc.stderr
    assert "Traceback" not in proc.stderr

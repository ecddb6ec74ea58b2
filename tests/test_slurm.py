"""Tests of bench.sh --slurm (the sweep as a Slurm job array, written by python -m sweep) and
slurm/local_cluster.sh, against a real single-node Slurm on this machine (Debian's slurm-wlm and
munge; .ci/run installs them).

Where slurm-wlm and munge are not installed, or not as root (slurmd starts the jobs), the tests that
need a cluster skip; the dry runs and the "no sbatch" refusal need no Slurm. Every cluster a test
starts is stopped in a fixture's teardown or a finally, whatever happens. They are marked slow: a
cluster's stop alone takes ~20 s."""

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_runs import bench

from core import option_checks
from helpers import ROOT, STUDY, SWEEP_MODULE, alive, read_json, wait_until
from sweep import cli as sweep_cli
from sweep import sbatch

# under pytest-xdist, one worker runs them: one cluster at a time
pytestmark = pytest.mark.xdist_group("slurm")

LOCAL_CLUSTER = ROOT / "slurm" / "local_cluster.sh"
SLURM_BINARIES = (
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "squeue",
    "scontrol",
    "scancel",
    "sinfo",
)
TINY = ["--", "--num-envs", "4", "--num-steps", "16"]
# A tiny sweep of two cells (seeds 1 and 2) of linen's default compile mode, one real run each: that
# a shard runs every framework of its cells is the dry runs' (test_bench.py's
# test_shards_split_the_matrix_by_cell, and here
# test_the_array_tasks_run_disjoint_shards_that_cover_the_sweep)
SWEEP = [
    "--experiments",
    "exp1",
    "--envs",
    "CartPole-v1",
    "--sizes",
    "small",
    "--seeds",
    "2",
    "--iterations",
    "2",
    "--frameworks",
    "linen",
]
JOB_WAIT_S = 900  # a safety net for a stuck job, not a timing assertion
# bench.sh's grace between a timed-out run's SIGTERM and its SIGKILL, when --kill-after is not given
KILL_AFTER_DEFAULT = int(sweep_cli.KILL_AFTER_S)


def missing_slurm() -> str:
    missing = [
        b for b in SLURM_BINARIES if not shutil.which(b) and not Path("/usr/sbin", b).exists()
    ]
    if missing:
        return (
            f"slurm-wlm and munge are not installed ({', '.join(missing)} not found; "
            "apt-get install slurm-wlm munge)"
        )
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root (slurmd starts the jobs as their user)"
    return ""


needs_slurm = pytest.mark.skipif(bool(missing_slurm()), reason=missing_slurm() or "-")


def local_cluster(action: str, folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(LOCAL_CLUSTER), action, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def daemon_pids(folder: Path) -> dict[str, int]:
    pids = {}
    for name, path in (
        ("munged", "munge/munged.pid"),
        ("slurmctld", "slurmctld.pid"),
        ("slurmd", "slurmd.pid"),
    ):
        if (folder / path).exists():
            pids[name] = int((folder / path).read_text().split()[0])
    return pids


def slurm(env: dict, *cmd: str) -> str:
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )
    assert proc.returncode == 0, f"{shlex.join(cmd)}: {proc.stderr}"
    return proc.stdout


def wait_for_job(env: dict, job: str, log_dir: Path) -> None:
    """Until the job array has left the queue; then every task must have completed with exit code
    0."""
    deadline = time.monotonic() + JOB_WAIT_S
    while slurm(env, "squeue", "-h", "-j", job, "-o", "%i").strip():
        if time.monotonic() > deadline:
            logs = "\n".join(
                p.read_text()[-1500:]
                for p in sorted((log_dir / "logs" / "slurm").glob(f"{job}_*.out"))
            )
            pytest.fail(
                f"job {job} still queued or running after {JOB_WAIT_S} s; its logs:\n{logs}"
            )
        time.sleep(1)
    records = slurm(env, "scontrol", "show", "job", job).split("\n\n")
    states = [
        (re.search(r"JobState=(\S+)", r)[1], re.search(r"ExitCode=(\S+)", r)[1])
        for r in records
        if r.strip()
    ]
    assert states and all(state == ("COMPLETED", "0:0") for state in states), states


def submitted_job(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return re.search(r"^submitted job array (\d+): ", proc.stdout, re.M)[1]


def task_outputs(log_dir: Path, job: str) -> dict[int, str]:
    return {
        int(p.stem.split("_")[1]): p.read_text()
        for p in (log_dir / "logs" / "slurm").glob(f"{job}_*.out")
    }


def cells_run(output: str) -> set[tuple]:
    """(experiment, seed, env, size) of every run a task's output reports completed."""
    cells = set()
    for exp, env, _fw, size, _mode, seed in re.findall(
        r"^\[\d+/\d+\] (\S+) (\S+) (\S+) (\S+) (\S+) seed (\d+) \.\.\. "
        r"completed in ",
        output,
        re.M,
    ):
        cells.add((exp, int(seed), env, size))
    return cells


# --------------------------------------------------------------------------------- no Slurm needed
def dry_run_script(tmp_path: Path, *args: str) -> tuple[str, str]:
    proc = bench("--dry-run", "--slurm", "--log-dir", str(tmp_path / "runs"), *args, timeout=120)
    assert proc.returncode == 0, proc.stderr
    script, _, count_line = proc.stdout.rstrip("\n").rpartition("\n")
    assert not (tmp_path / "runs").exists()  # a dry run creates nothing
    return script, count_line


def test_dry_run_prints_the_array_script(tmp_path):
    sel = ["--experiments", "exp3", "--frameworks", "linen", "--seeds", "1"]
    cells = len(STUDY.experiments["exp3"].envs) * len(STUDY.experiments["exp3"].sizes)
    runs = cells * len(STUDY.frameworks["linen"].compile)
    script, count_line = dry_run_script(tmp_path, *sel)  # default: one task per cell
    assert (
        count_line
        == f"dry run: sbatch script of {cells} array tasks for {runs} runs (0 already completed) "
        f"in {cells} cells; nothing submitted"
    )
    assert script.startswith("#!/bin/bash\n")
    assert f"\n#SBATCH --array=0-{cells - 1}\n" in script and "\n#SBATCH --exclusive\n" in script
    assert (
        f"\nNUM_TASKS={cells}\n" in script and 'SHARD="$SLURM_ARRAY_TASK_ID/$NUM_TASKS"' in script
    )
    assert re.search(r'^exec bash \S+/bench\.sh --shard "\$SHARD" ', script, re.M)
    assert f"#SBATCH --output={tmp_path}/runs/logs/slurm/%A_%a.out" in script
    # no --timeout: no time limit
    assert "#SBATCH --time" not in script and "partition's default" in script
    assert '--env-timing-file "$LOG_DIR/env_timing/$(hostname).json"' in script  # one file per node

    script, count_line = dry_run_script(
        tmp_path,
        *sel,
        "--slurm-tasks",
        "2",
        "--slurm-parallel",
        "1",
        "--no-env-timing",
        "--timeout",
        "100",
        "--slurm-args",
        '--partition=gpu --gres=gpu:1 --comment "tiny sweep"',
    )
    assert "\n#SBATCH --array=0-1%1\n" in script and "\nNUM_TASKS=2\n" in script
    assert (
        '\n#SBATCH --partition=gpu\n#SBATCH --gres=gpu:1\n#SBATCH --comment "tiny sweep"\n'
        in script
    )
    assert "--no-env-timing" in script and "--env-timing-file" not in script
    assert "array tasks" in count_line and "nothing submitted" in count_line
    # the largest of the 2 shards has ceil(cells / 2) cells; each run may take --timeout +
    # bench.sh's grace
    per_task = -(-cells // 2) * len(STUDY.frameworks["linen"].compile)
    minutes = -(-(per_task * (100 + KILL_AFTER_DEFAULT) + sbatch.TIME_MARGIN_S) // 60)
    assert f"\n#SBATCH --time=0-{minutes // 60:02d}:{minutes % 60:02d}:00\n" in script


def test_sweep_py_sbatch_takes_bench_sh_default_kill_after(tmp_path):
    """python -m sweep sbatch without --kill-after (sweep/cli.py's default) gives the time limit
    bench.sh --slurm gives."""
    sel = ["--experiments", "exp3", "--frameworks", "linen", "--seeds", "1", "--timeout", "100"]
    script, _ = dry_run_script(tmp_path, *sel)
    sweep = subprocess.run(
        [sys.executable, *SWEEP_MODULE, "sbatch", "--log-dir", str(tmp_path / "runs")]
        + ["--python", sys.executable, *sel],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert sweep.returncode == 0, sweep.stderr
    limit = re.compile(r"^#SBATCH --time=.*$", re.M)
    assert limit.findall(sweep.stdout) == limit.findall(script) != []


# the array's tasks run one after another
@pytest.mark.slow
def test_the_array_tasks_run_disjoint_shards_that_cover_the_sweep(tmp_path):
    """The printed script, run as each array task would be (with --dry-run slipped into its bench.sh
    call). No run arguments after --, which each bench.sh call would check by importing the script:
    that they reach every task's runs is
    test_a_sweep_on_slurm_runs_each_cell_once_and_resubmitting_skips_completed_runs's."""
    sel = ["--experiments", "exp3", "--frameworks", "linen", "--seeds", "2", "--iterations", "3"]
    script, _ = dry_run_script(tmp_path, *sel, "--slurm-tasks", "3")
    whole = bench(
        "--dry-run", "--log-dir", str(tmp_path / "runs"), *sel, timeout=120
    ).stdout.splitlines()[:-1]
    probe = tmp_path / "task.sh"
    probe.write_text(
        script.replace('bench.sh --shard "$SHARD"', 'bench.sh --dry-run --shard "$SHARD"')
    )
    parts = []
    for task in range(3):
        env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_JOB_ID": "1"}
        proc = subprocess.run(
            ["bash", str(probe)], capture_output=True, text=True, timeout=120, env=env
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[-1].endswith(f"shard {task}/3")
        # the task's echo line first, the count line last
        parts.append(proc.stdout.splitlines()[1:-1])
    assert all(parts) and sorted(sum(parts, [])) == sorted(whole)  # disjoint and covering


@pytest.mark.parametrize(
    "args,bad",
    [
        (["--slurm-tasks", "2"], "--slurm-tasks needs --slurm"),
        (["--slurm", "--slurm-tasks", "0"], "'0'"),
        (["--slurm", "--slurm-tasks", "99", "--experiments", "exp3", "--seeds", "1"], "99"),
        (["--slurm", "--slurm-parallel", "many"], "many"),
        (["--slurm", "--shard", "0/2"], "--shard"),
        (["--slurm", "--slurm-args", "gpu"], "'gpu'"),
        (["--slurm", "--slurm-args", "--array=0-3"], "--array"),
        (["--slurm", "--slurm-args", "--comment 'x"], "--slurm-args"),
        (["--slurm", "--env-timing-file", "t.json"], "--env-timing-file"),
    ],
)
def test_bad_slurm_options_exit_2_with_one_line(tmp_path, args, bad):
    proc = bench("--dry-run", "--log-dir", str(tmp_path / "runs"), *args, timeout=120)
    assert proc.returncode == 2, proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1 and bad in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists()


def test_slurm_without_sbatch_exits_2_with_one_line(tmp_path):
    bin_dir = tmp_path / "bin"  # every command of PATH but sbatch
    bin_dir.mkdir()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        for tool in Path(folder).glob("*") if Path(folder).is_dir() else ():
            if tool.name != "sbatch" and not (bin_dir / tool.name).exists():
                (bin_dir / tool.name).symlink_to(tool)
    proc = bench(
        "--slurm", "--log-dir", str(tmp_path / "runs"), env={"PATH": str(bin_dir)}, timeout=120
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        proc.stderr.strip()
        == "bench.sh: --slurm: sbatch was not found; run this on a Slurm login node "
        "(or start a local one: slurm/local_cluster.sh)"
    )
    assert proc.stdout == "" and not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------- the local cluster
def job_sleepers() -> list[str]:
    return subprocess.run(
        ["pgrep", "-f", "^sleep 300$"], capture_output=True, text=True
    ).stdout.split()


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """The local Slurm cluster of this module's tests, started once: (its folder, what start said).
    Stopped at the end whatever happens (the module's last test stops it itself, and checks that
    everything ended: a second stop finds nothing left)."""
    reason = missing_slurm()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("slurm")
    try:
        start = local_cluster("start", folder)
        assert start.returncode == 0, start.stderr
        yield folder, start
    finally:
        local_cluster("stop", folder)


@pytest.fixture(scope="module")
def cluster(started):
    """The environment that points sbatch, squeue, … at the module's local Slurm cluster."""
    folder, _ = started
    return {"SLURM_CONF": str(folder / "slurm.conf")}


@needs_slurm
@pytest.mark.slow
def test_sbatch_refusing_the_job_exits_1_and_leaves_nothing(cluster, tmp_path):
    proc = bench(
        "--slurm",
        "--log-dir",
        str(tmp_path / "runs"),
        *SWEEP,
        "--slurm-args",
        "--partition=nope",
        env=cluster,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # sbatch's own message, then ours
    assert "nope" in proc.stderr and "sbatch refused the job" in proc.stderr
    assert not (tmp_path / "runs").exists()


@needs_slurm
@pytest.mark.slow
def test_a_sweep_on_slurm_runs_each_cell_once_and_resubmitting_skips_completed_runs(
    cluster, tmp_path
):
    """Also the #SBATCH lines as the real sbatch reads them: a --comment with quotes, # and $(…)
    arrives whole, the tasks' output lands in a log dir with spaces, quotes and a %, and nothing of
    either runs in a shell."""
    log_dir = tmp_path / "my runs 'q' %x $(touch pwned)"
    comment = "a b #c 'q' \"d\" \\e $(touch pwned)"
    args = (
        "--slurm",
        "--slurm-tasks",
        "2",
        "--log-dir",
        str(log_dir),
        *SWEEP,
        "--slurm-args",
        f"--comment {shlex.quote(comment)}",
        *TINY,
    )
    planned = bench(
        "--dry-run", "--log-dir", str(log_dir), *SWEEP, *TINY, timeout=120
    ).stdout.splitlines()[:-1]
    num_runs = len(planned)
    assert num_runs == 2

    first = bench(*args, env=cluster, timeout=120)
    job = submitted_job(first)
    assert f"script: {log_dir}/logs/slurm/benchback_" in first.stdout
    assert f"logs:   {log_dir}/logs/slurm/{job}_{{0..1}}.out" in first.stdout
    # --slurm-args reached sbatch as given (scontrol adds a space)
    shown = slurm(cluster, "scontrol", "show", "job", job)
    assert re.search(rf"^ *Comment={re.escape(comment)} *$", shown, re.M), shown
    wait_for_job(cluster, job, log_dir)

    outputs = task_outputs(log_dir, job)
    assert sorted(outputs) == [0, 1]
    for task, output in outputs.items():
        assert f"task {task}: shard {task}/2 on {socket.gethostname()}" in output
        assert re.search(r"^1 completed, 0 failed, 0 skipped$", output, re.M), output[-2000:]
    cells = [cells_run(output) for output in outputs.values()]
    # the two tasks ran disjoint cells
    assert len(cells[0]) == len(cells[1]) == 1 and not cells[0] & cells[1]
    assert cells[0] | cells[1] == {("exp1", seed, "CartPole-v1", "small") for seed in (1, 2)}
    summaries = sorted((log_dir / "exp1").glob("*/summary.json"))
    assert len(summaries) == num_runs and all(
        read_json(p)["status"] == "completed" for p in summaries
    )
    for path in summaries:  # every run keeps its node's hostname and device
        config = read_json(path.parent / "config.json")
        assert config["hostname"] == socket.gethostname() and config["device_name"]
        # the run arguments after -- reached every task's runs
        assert (config["num_envs"], config["num_steps"]) == (4, 16)
    # env timing: once per node, into that node's own file (the second task found it there)
    timing = read_json(log_dir / "env_timing" / f"{socket.gethostname()}.json")
    assert timing["hostname"] == socket.gethostname() and "CartPole-v1" in timing["envs"]
    assert not (log_dir / "env_timing.json").exists()
    assert sum("measuring the env step costs first" in output for output in outputs.values()) == 1

    again = bench(*args, env=cluster, timeout=120)  # every run completed: nothing to submit
    assert again.returncode == 0, again.stderr
    assert (
        again.stdout.strip()
        == f"all {num_runs} runs of this sweep are completed in {log_dir}: nothing to submit"
    )
    assert len(list((log_dir / "logs" / "slurm").glob("*.out"))) == 2

    # one run lost: the resubmitted array runs it alone and skips the others
    lost = summaries[0].parent
    shutil.rmtree(lost)
    third = bench(*args, env=cluster, timeout=120)
    job3 = submitted_job(third)
    assert (
        f"submitted job array {job3}: 2 tasks; runs to do: 1 of {num_runs}, in 2 cells"
        in third.stdout
    )
    wait_for_job(cluster, job3, log_dir)
    ends = sorted(
        output.strip().splitlines()[-1] for output in task_outputs(log_dir, job3).values()
    )
    assert ends == ["0 completed, 0 failed, 1 skipped", "1 completed, 0 failed, 0 skipped"]
    assert len(list((log_dir / "exp1").glob("*/summary.json"))) == num_runs

    # plot_results.py reads the runs of every node: one shared folder, or one folder per node
    merged = plot(tmp_path / "merged", log_dir)
    other_node = tmp_path / "node-b" / "exp1"
    other_node.mkdir(parents=True)
    for run_dir in sorted((log_dir / "exp1").iterdir())[:1]:
        shutil.move(run_dir, other_node / run_dir.name)
    split = plot(tmp_path / "split", log_dir, other_node.parent)
    assert merged == split and len(merged) == num_runs
    assert not list(tmp_path.rglob("pwned")) and not (ROOT / "pwned").exists()


# --slurm-args and a log dir as the real sbatch reads them (quotes, #, $(…), spaces, a %):
# test_a_sweep_on_slurm_runs_each_cell_once_and_resubmitting_skips_completed_runs


def plot(out: Path, *runs_dirs: Path) -> list[tuple]:
    """plot_results.py (tables only) over the folders; the (framework, seed, hostname, device) of
    each run read."""
    cmd = [
        sys.executable,
        str(ROOT / "plot_results.py"),
        *map(str, runs_dirs),
        "--out",
        str(out),
        "--no-figures",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    import pandas as pd

    summary = pd.read_csv(out / "summary.csv")
    assert (
        set(summary["hostname"]) == {socket.gethostname()} and summary["device_name"].notna().all()
    )
    return sorted(
        summary[["framework", "seed", "hostname", "device_name"]].itertuples(index=False, name=None)
    )


# -------------------------------------------------------- --slurm-args as the real sbatch reads it
def sbatch_probe(cluster: dict, folder: Path, *words: str) -> subprocess.CompletedProcess:
    """The real sbatch on a script whose one #SBATCH line holds `words`, verbose (it lists each
    option it set, as "sbatch: NAME : VALUE") and --test-only (nothing is submitted)."""
    script = folder / "probe.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH {' '.join(words)}\ntrue\n")
    cmd = ["sbatch", "-v", "--test-only", str(script)]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=60, env={**os.environ, **cluster}
    )


def options_set(proc: subprocess.CompletedProcess) -> set[str]:
    return set(re.findall(r"^sbatch: (\S+) +: ", proc.stderr, re.M)) - {"test-only", "verbose"}


@needs_slurm
@pytest.mark.slow
def test_the_sbatch_option_table_is_the_real_sbatchs(cluster, tmp_path):
    """python -m sweep's table of sbatch options, against the sbatch here: every long option it
    lists takes a value as the table says (getopt_long's errors tell), and `sbatch --help` names no
    option nor letter the table lacks."""
    for name in sbatch.SBATCH_NO_VALUE + sbatch.SBATCH_OPTIONAL_VALUE + sbatch.SBATCH_VALUE:
        alone, valued = (
            sbatch_probe(cluster, tmp_path, f"--{name}"),
            sbatch_probe(cluster, tmp_path, f"--{name}=1"),
        )
        assert "unrecognized option" not in alone.stderr + valued.stderr, name
        assert (f"option '--{name}' requires an argument" in alone.stderr) == (
            name in sbatch.SBATCH_VALUE
        ), name
        assert (f"option '--{name}' doesn't allow an argument" in valued.stderr) == (
            name in sbatch.SBATCH_NO_VALUE
        )
    for letter, name in sbatch.SBATCH_LETTERS.items():
        requires = (
            f"option requires an argument -- '{letter}'"
            in sbatch_probe(cluster, tmp_path, f"-{letter}").stderr
        )
        assert requires == (name in sbatch.SBATCH_VALUE), letter
    shown = slurm(cluster, "sbatch", "--help")
    known = {
        *sbatch.SBATCH_NO_VALUE,
        *sbatch.SBATCH_OPTIONAL_VALUE,
        *sbatch.SBATCH_VALUE,
    }
    assert set(re.findall(r"--([a-z][a-z-]*[a-z])", shown)) <= known
    assert dict(re.findall(r"^\s+-(\w),?\s+--([a-z-]+)", shown, re.M)) == sbatch.SBATCH_LETTERS


OWN_VALUES = {
    "array": "5",
    "output": "/tmp/x.out",
    "error": "/tmp/x.err",
    "wrap": "true",
    "signal": "KILL@1",
}


def slurm_args_forms() -> list[list[str]]:
    """Ways to write sbatch options: every prefix of each option bench.sh sets, its value attached
    with = or in the next word; each letter of one, its value attached, apart, or after another
    letter (-Ha5); and words that only look like one (--comment -a5: a comment), or that sbatch
    refuses for another reason (-za5, --hold=1)."""
    forms = []
    for option in sbatch.SBATCH_OWN:
        value = OWN_VALUES.get(option, "1") if option in sbatch.SBATCH_VALUE else None
        for n in range(1, len(option) + 1):
            prefix = f"--{option[:n]}"
            forms += (
                [[f"{prefix}={value}"], [prefix, value]]
                if value
                else [[prefix], [f"{prefix}=user"]]
            )
    for letter, option in sbatch.SBATCH_LETTERS.items():
        if option in sbatch.SBATCH_OWN:
            if option in sbatch.SBATCH_VALUE:
                value = OWN_VALUES.get(option, "1")
                forms += [[f"-{letter}{value}"], [f"-H{letter}{value}"], [f"-{letter}", value]]
            else:
                forms += [[f"-{letter}"], [f"-H{letter}"], [f"-{letter}H"]]
    return forms + [
        ["--comment", "-a5"],
        ["--comment=-o/tmp/x"],
        ["-J", "-a5"],
        ["-Jx"],
        ["-H"],
        ["--hold"],
        ["--hold=1"],
        ["-plocal"],
        ["--part", "local"],
        ["--time=5"],
        ["-t", "5"],
        ["--job=x"],
        ["--ntasks-per-node=1"],
        ["--tasks=1"],
        ["-za5"],
        ["-ka6"],
        ["--ex=x"],
        ["--no"],
        ["--w"],
    ]


@needs_slurm
@pytest.mark.slow
def test_slurm_args_refuses_exactly_what_the_real_sbatch_reads_as_an_option_bench_sh_sets(
    cluster, tmp_path
):
    """Each form, on an #SBATCH line of the real sbatch, against python -m sweep's reading of it
    (bench.sh --slurm-args): refused exactly when sbatch sets an option bench.sh sets, or finds the
    option ambiguous."""
    disagree, accepted = [], []
    for words in slurm_args_forms():
        proc = sbatch_probe(cluster, tmp_path, *words)
        said = proc.stderr
        # and its name alone: sbatch names the long option it takes it for when the value is
        # missing (--wrap=true sets nothing listed)
        if words[0].startswith("--"):
            said += sbatch_probe(cluster, tmp_path, words[0].split("=")[0]).stderr
        taken = re.findall(r"option '--([a-z-]+)' (?:requires|doesn't allow) an argument", said)
        own = "is ambiguous" in proc.stderr or bool(
            {*options_set(proc), *taken} & set(sbatch.SBATCH_OWN)
        )
        try:
            sbatch.sbatch_lines(shlex.join(words))
            refused = False
        except option_checks.BadOption:
            refused = True
        if refused != own:
            disagree.append((words, proc.stderr[-300:]))
        if not refused and proc.returncode == 0:
            accepted.append(shlex.join(words))
    assert not disagree
    assert {"--comment -a5", "-J -a5", "--part local", "--tasks=1"} <= set(accepted)
    # together, in the job's script: sbatch keeps what bench.sh set
    script, _ = dry_run_script(
        tmp_path,
        "--experiments",
        "exp3",
        "--seeds",
        "1",
        "--slurm-tasks",
        "2",
        "--slurm-args",
        " ".join(accepted),
    )
    (tmp_path / "job.sbatch").write_text(script)
    proc = subprocess.run(
        ["sbatch", "-v", "--test-only", str(tmp_path / "job.sbatch")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **cluster},
    )
    assert proc.returncode == 0, proc.stderr
    listed = dict(re.findall(r"^sbatch: (\S+) +: (.*)$", proc.stderr, re.M))
    assert listed["array"] == "0-1" and listed["signal"] == f"B:TERM@{sbatch.SIGNAL_BEFORE_S}"
    assert listed["output"] == f"{tmp_path}/runs/logs/slurm/%A_%a.out" and "error" not in listed
    assert (listed["nodes"], listed["ntasks"], listed["exclusive"]) == ("1", "1", "exclusive")
    # the last of each: values, not options
    assert listed["comment"] == "-o/tmp/x" and listed["job-name"] == "x"


# the module's cluster (one start and stop fewer than a cluster of its own): last, as it stops it
@needs_slurm
@pytest.mark.slow
def test_local_cluster_starts_runs_a_job_and_stops_everything(started, cluster, tmp_path):
    folder, start = started
    env = cluster
    pids = {}
    try:
        assert start.stdout.startswith(f"export SLURM_CONF={folder}/slurm.conf")
        pids = daemon_pids(folder)
        assert set(pids) == {"munged", "slurmctld", "slurmd"} and all(map(alive, pids.values()))
        assert "idle" in slurm(env, "sinfo", "-h", "-o", "%T")
        out = tmp_path / "job.out"
        job = slurm(
            env,
            "sbatch",
            "--parsable",
            f"--output={out}",
            "--wrap",
            "echo $SLURM_JOB_ID; exec sleep 300",
        )
        job = job.strip().split(";")[0]
        deadline = time.monotonic() + 120
        # the job is running: a process that stop must end
        while not (out.exists() and out.read_text().strip()):
            assert time.monotonic() < deadline, slurm(env, "squeue")
            time.sleep(0.5)
        assert out.read_text().strip() == job
    finally:
        stop = local_cluster("stop", folder)
    assert stop.returncode == 0, stop.stderr
    assert not [name for name, pid in pids.items() if alive(pid)]
    # the job is cancelled with the cluster; its step may take a moment to die on a loaded machine
    wait_until(lambda: not job_sleepers(), timeout=10, what="the cancelled job's sleep to end")

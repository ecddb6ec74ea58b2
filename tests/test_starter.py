"""./setup.sh starter FRAMEWORK DIR (tools/starter.py): each framework's starter is the template as
it is (cmp) and the files it imports; built into an empty folder, it trains from that folder where
no module of the repository can be imported (its plain bookkeeping, core/plain_bookkeeping.py),
names itself, ends with a line that says where its logs went, never shares a run folder, gives the
template's answers to the same command lines, and refuses bad input in one line; the tool refuses a
bad framework or a folder that is not empty, and a copy whose files import one it lacks."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import event_files
from helpers import STUDY, as_from_a_shell
from tools import starter

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("linen", "nnx", "equinox", "torch")
TINY = ["--num-envs", "4", "--num-steps", "16", "--update-epochs", "1", "--num-minibatches", "2"]
TINY += ["--num-iterations", "2"]
DONE = re.compile(r"^(completed): \d+/\d+ iterations, logs in (runs/\S+)$")


def build(framework: str, folder, via_setup: bool = True) -> subprocess.CompletedProcess:
    """The starter command, as the README shows it (or python -m tools.starter), from the
    repository."""
    if via_setup:
        command = [str(ROOT / "setup.sh"), "starter", framework, str(folder)]
    else:
        command = [sys.executable, "-m", "tools.starter", framework, str(folder)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def clean_env() -> dict:
    """The environment with no PYTHONPATH: run from the copy's folder, nothing of the repository
    imports."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def run_copy(folder: Path, script: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, script, *argv],
        cwd=folder,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def expected_files(framework: str) -> set[str]:
    pieces = {"env_normalize.py", "checkpoint.py", "atomic.py"}
    pieces |= {"env_adapters.py", "core"}
    return {f"ppo_{framework}.py", *pieces} | ({"torch_glue.py"} if framework == "torch" else set())


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_starter_is_the_template_and_the_files_it_imports_as_they_are(tmp_path, framework):
    folder = tmp_path / "project"
    done = build(framework, folder, via_setup=False)
    assert done.returncode == 0, done.stderr
    assert {path.name for path in folder.iterdir()} == expected_files(framework)
    # core/ without its __init__.py (whose docstring names the whole floor): what the copy imports
    core = sorted(path.name for path in (folder / "core").iterdir())
    pieces = ["env_ids.py", "event_files.py", "plain_bookkeeping.py", "resuming.py", "saving.py"]
    assert core == pieces
    for path in folder.rglob("*.py"):
        name = path.relative_to(folder)
        assert path.read_bytes() == (ROOT / name).read_bytes(), name


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_starter_trains_alone_and_refuses_bad_input_in_one_line(tmp_path, framework):
    folder = tmp_path / "project"
    folder.mkdir()  # an empty folder is taken too
    done = build(framework, folder)
    assert done.returncode == 0, done.stderr
    script = f"ppo_{framework}.py"
    # the clean environment really cannot reach the repository's modules
    probe = run_copy(folder, "-c", "import bookkeeping")
    assert probe.returncode != 0 and "No module named 'bookkeeping'" in probe.stderr

    # one run, continuous (a discrete one in a copy: test_a_starter_copy_resumes_its_stopped_run_...
    # and test_a_starter_copy_names_its_run_by_exp_name_...; the copy is the template, cmp, and the
    # files it imports, lazily too:
    # test_a_copy_whose_file_imports_a_module_it_lacks_stops_the_tool).
    # Every folder name the run could take in the next 10 minutes is taken already, each holding a
    # file of its own: the run makes a new one beside it ("-2") and touches none of them
    mode = STUDY.default_compile(framework)
    pendulum_name = f"Pendulum-v1__{framework}__small__{mode}__1"
    now = int(time.time())
    taken = [folder / "runs" / f"{pendulum_name}__{second}" for second in range(now - 1, now + 600)]
    for path in taken:
        path.mkdir(parents=True)
        (path / "mine.txt").write_text("another run's")
    pendulum = run_copy(folder, script, "--env", "Pendulum-v1", "--norm-obs", *TINY)
    assert pendulum.returncode == 0, pendulum.stderr
    lines = pendulum.stdout.strip().splitlines()
    assert lines[0].startswith(f"{script}: importing ")
    pendulum_dir = folder / DONE.match(lines[-1]).group(2)
    assert pendulum_dir.name.startswith(f"Pendulum-v1__{framework}__small__")
    assert pendulum_dir.parent / pendulum_dir.name.removesuffix("-2") in taken
    assert list(pendulum_dir.glob("events.out.tfevents.*"))
    assert all([p.name for p in path.iterdir()] == ["mine.txt"] for path in taken)

    runs_before = sorted((folder / "runs").iterdir())
    unknown = run_copy(folder, script, "--env", "NoSuchEnv-v0", *TINY)
    assert unknown.returncode == 2
    error = unknown.stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: env 'NoSuchEnv-v0' is unknown")
    assert "CartPole-v1" in error[0] and "Pendulum-v1" in error[0]
    out_of_range = run_copy(folder, script, "--num-envs", "0")
    assert out_of_range.returncode == 2
    assert out_of_range.stderr.strip().splitlines() == [
        "error: --num-envs must be a positive integer, got 0"
    ]
    assert sorted((folder / "runs").iterdir()) == runs_before  # refused before any run folder


def refused(command: subprocess.CompletedProcess) -> str:
    assert command.returncode == 2, command.stdout + command.stderr
    lines = command.stderr.strip().splitlines()
    assert len(lines) == 1 and not command.stdout, command.stdout + command.stderr
    return lines[0]


def test_the_starter_refuses_a_folder_that_is_not_empty_and_writes_nothing(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert "is not empty" in refused(build("nnx", folder))
    assert [path.name for path in folder.iterdir()] == ["notes.txt"]
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    assert "is a file" in refused(build("nnx", a_file))
    assert a_file.read_text() == "mine"


def test_the_starter_refuses_a_bad_framework_and_names_the_valid_ones(tmp_path):
    line = refused(build("jax", tmp_path / "project"))
    assert "'jax'" in line and "linen, nnx, equinox, torch" in line
    assert not (tmp_path / "project").exists()
    missing_dir = subprocess.run(
        [str(ROOT / "setup.sh"), "starter", "nnx"], capture_output=True, text=True, timeout=60
    )
    assert "starter needs FRAMEWORK DIR" in refused(missing_dir)


def test_a_copy_whose_file_imports_a_module_it_lacks_stops_the_tool():
    """A file of the copy that imports a repository module the copy lacks (lazily too) stops the
    tool; bookkeeping.py, which a script takes only when it is beside it, is no such module."""
    script = "ppo_x.py"
    optional = "try:\n    from bookkeeping import Bookkeeping\nexcept ImportError:\n    pass\n"
    starter.check_imports({script: optional + "import atomic\n", "atomic.py": ""})
    broken = [
        {script: "import atomic\n"},
        {script: "", "checkpoint.py": "def f():\n    from evaluation import hub\n"},
        {script: "from core import env_ids\n"},
    ]
    for files in broken:
        with pytest.raises(starter.TemplateChanged, match="it imports"):
            starter.check_imports(files)


def names_outside(files: dict[str, str]) -> list[str]:
    """The repository's .py files and folders that the text of files names (core/env_ids.py,
    evaluation/) but that are not among them: `file: name` for each."""
    found = []
    for name, text in files.items():
        for token in re.findall(r"[\w./]*\w\.py\b|\b\w+/", text):
            path = token.strip("./")
            if (ROOT / path).exists() and not any(
                f == path or f.startswith(path + "/") for f in files
            ):
                found.append(f"{name}: {token}")
    return found


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_starter_copy_names_no_file_it_does_not_have(framework):
    """No docstring, comment or message of a copy's files names a file or folder of the repository
    that the copy lacks (a starter's reader would look for it in vain)."""
    files = starter.starter_files(starter.frameworks()[framework])
    assert names_outside(files) == []
    assert names_outside({"a.py": "see evaluation/ and atomic.py", "atomic.py": ""}) == [
        "a.py: evaluation/"
    ]


def unwritable_folders() -> list:
    """Folders of this machine where no file can be made (/proc; /sys, read-only here, or root's
    rights refused): those that really refuse one, for the test of the starter's refusal."""
    found = []
    for folder in ("/proc", "/sys"):
        try:
            with open(os.path.join(folder, ".starter-probe"), "x"):
                pass
            os.unlink(os.path.join(folder, ".starter-probe"))
        except OSError:
            found.append(folder)
    return found


def test_the_starter_refuses_a_dir_it_cannot_make_in_one_line_and_makes_nothing(tmp_path):
    """DIR a link to nothing, a folder below a file or below such a link, in /proc or on a file
    system that refuses a new file: one line, exit 2, no traceback, nothing made (the link's target
    not made either)."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "afile").write_text("mine")
    cases = {
        tmp_path / "dangling": "is a symbolic link to nothing",
        tmp_path / "dangling" / "sub": "is a symbolic link to nothing",
        tmp_path / "afile" / "sub": f"{tmp_path / 'afile'} is a file",
    }
    cases |= {Path(folder) / "newdir": "cannot write into" for folder in unwritable_folders()}
    for folder, wanted in cases.items():
        assert wanted in refused(build("nnx", folder)), folder
        assert not folder.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "dangling"]
    assert not (tmp_path / "nowhere").exists() and (tmp_path / "afile").read_text() == "mine"


@pytest.mark.parametrize("framework", ["nnx", "torch"])
def test_a_starter_copy_refuses_a_log_dir_that_is_a_file_in_one_line(tmp_path, framework):
    folder = tmp_path / "project"
    assert build(framework, folder, via_setup=False).returncode == 0
    (folder / "afile").write_text("mine")
    copy = run_copy(folder, f"ppo_{framework}.py", *TINY, "--log-dir", "afile")
    assert copy.returncode == 2, copy.stderr
    lines = copy.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: [Errno 20] Not a directory: 'afile/")
    assert (folder / "afile").read_text() == "mine"


@pytest.mark.slow
def test_a_starter_copy_resumes_its_stopped_run_without_a_config_json(tmp_path):
    """A copy writes no config.json: --resume RUN_DIR alone takes its resume file's flags as the
    run's, goes on from its save, and refuses the run once it has completed."""
    folder = tmp_path / "project"
    assert build("linen", folder, via_setup=False).returncode == 0
    args = ["--env", "CartPole-v1", *TINY[:-1], "200", "--save-every", "2"]
    proc = subprocess.Popen(
        [sys.executable, "ppo_linen.py", *args],
        cwd=folder,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=as_from_a_shell,
    )
    try:
        for line in proc.stdout:
            # a SIGTERM (issue 79: the copy had no handler, and died) stops it at its next
            # iteration boundary
            if line.startswith("iter 2/"):
                proc.send_signal(signal.SIGTERM)
                break
        output, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, output[-3000:]
    assert output.splitlines()[-1].startswith("interrupted: 2/200 iterations, logs in runs/")
    assert "Traceback" not in output
    (run_dir,) = (folder / "runs").iterdir()
    assert not (run_dir / "config.json").exists()
    # its events flushed on the way out: the file's version, the hyperparameters, an iteration each
    (events,) = run_dir.glob("events.out.tfevents.*")
    assert len(event_files.event_records(events.read_bytes())) >= 4
    # alone: the run's flags are its resume file's
    resumed = run_copy(folder, "ppo_linen.py", "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resume.safetensors: resumed after iteration " in resumed.stdout
    assert "iter 200/200" in resumed.stdout
    again = run_copy(folder, "ppo_linen.py", *args, "--resume", str(run_dir))
    assert again.returncode == 2
    (line,) = again.stderr.strip().splitlines()
    assert line.startswith("error: --resume") and "that run completed" in line


@pytest.mark.slow
def test_a_starter_copy_names_its_run_by_exp_name_and_points_envpool_ids_to_their_backend(
    tmp_path,
):
    folder = tmp_path / "project"
    assert build("linen", folder, via_setup=False).returncode == 0
    copy = run_copy(folder, "ppo_linen.py", *TINY, "--exp-name", "tuned")
    assert copy.returncode == 0, copy.stderr[-3000:]
    (run_dir,) = (folder / "runs").iterdir()
    # CleanRL's place: after the env
    assert run_dir.name.startswith("CartPole-v1__tuned__linen__"), run_dir.name
    refused = run_copy(folder, "ppo_linen.py", *TINY, "--env", "HalfCheetah-v4")
    assert (
        refused.returncode == 2 and "is an envpool env: add --env-backend envpool" in refused.stderr
    )


# the same command lines to a template and to its copy: --help, bad input refused by Args' own
# checks or by tyro, good ones (their first line, the import's; the process then killed), CleanRL's
# --env-id
SAME_ANSWERS = [
    ["--help"],
    ["--num-minibatches", "7"],
    ["--num-envs", "0"],
    ["--gamma", "2"],
    ["--learning-rate", "nan"],
    ["--exp-name", "a/b"],
    ["--log-dir", "s3://bucket/runs"],
    ["--model-size", "huge"],
    ["--num-envs", "four"],
    ["--env", "CartPole-v1", *TINY],
    # CleanRL's name, an alias of Args' own
    ["--env-id", "Acrobot-v1", "--num-envs", "0"],
    ["--env-id", "CartPole-v1", *TINY],
    # CleanRL's run length, Args' own field with its rule
    ["--total-timesteps", "5000"],
]


def first_answer(folder: Path, argv: list[str], env: dict) -> tuple:
    """(the exit code, the first line of output) of ppo_linen.py argv run in folder; a run that
    starts is killed once it has said its first line (its exit code then None)."""
    proc = subprocess.Popen(
        [sys.executable, "ppo_linen.py", *argv],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = proc.stdout.readline().rstrip("\n")
        if line.endswith("importing JAX, Flax Linen and gymnax..."):
            return None, line
        proc.communicate(timeout=120)
        return proc.returncode, line
    finally:
        proc.kill()
        proc.wait()


def test_a_template_and_its_copy_give_the_same_answers(tmp_path):
    """The template with the benchmark's bookkeeping beside it, and its copy with the plain one:
    the same exit code and the same first line, for each of SAME_ANSWERS."""
    folder = tmp_path / "project"
    assert build("linen", folder, via_setup=False).returncode == 0
    for argv in SAME_ANSWERS:
        template = first_answer(ROOT, argv, dict(os.environ))
        assert template == first_answer(folder, argv, clean_env()), argv
        assert template[0] in (0, 2, None) and template[1], (argv, template)

"""benchmarks/quickstart.py and quickstart_steps.py: the README's quick-start lines timed from a
fresh clone. Nothing here is timed: the steps run in a clone of a tiny local git repository whose
setup.sh only echoes (and, for the demo, writes a run folder as the scripts do), and the checks are
on what is recorded, not on how long it took."""

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from tensorboardX import SummaryWriter

from analysis.common import BadInput
from benchmarks import common, quickstart, quickstart_steps
from benchmarks.quickstart_steps import MARKERS, PLACEHOLDER, Step
from helpers import ROOT

BATCH = 64
# iteration 0 compiles: 5.0 - median(1.0, 1.5, 0.5, 1.0) = 4.0
ITERATION_TIMES = [5.0, 1.0, 1.5, 0.5, 1.0]


def write_quickstart_run(run_dir: Path, times=ITERATION_TIMES) -> None:
    """A run folder as ppo_*.py writes it: config.json, summary.json and TensorBoard events."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"versions": {"python": "3.11.9"}}))
    summary = {"status": "completed", "total_s": 12.5, "final_return": -84.25}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    writer = SummaryWriter(str(run_dir))
    for i, seconds in enumerate(times):
        writer.add_scalar("time/iteration", seconds, (i + 1) * BATCH)
    writer.close()


def run_main(capsys, *argv) -> tuple[int, list[str], str]:
    code = quickstart.main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines(), captured.out


# ---------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("steps", ["demo,nope", "", "templates,Demo"])
def test_an_unknown_step_is_one_line_and_exit_2_before_any_clone(tmp_path, capsys, steps):
    out = tmp_path / "out"
    code, err, _ = run_main(capsys, "--steps", steps, "--out", out, "--repo", tmp_path / "no-repo")
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error: --steps")
    assert "demo, templates, pendulum, smoke, tests" in err[0]
    bad = {"demo,nope": "'nope'", "": "''", "templates,Demo": "'Demo'"}[steps]
    assert bad in err[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_readme_without_the_markers_is_refused_before_any_clone(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# no block here\n")
    code, err, _ = run_main(
        capsys, "--update-readme", readme, "--out", tmp_path / "out", "--repo", tmp_path / "none"
    )
    assert code == 2 and len(err) == 1 and MARKERS[0] in err[0], err
    assert readme.read_text() == "# no block here\n" and not (tmp_path / "out").exists()


def test_the_steps_run_in_their_order_and_tests_only_when_asked():
    assert quickstart_steps.step_groups("pendulum,demo") == ["demo", "pendulum"]
    assert quickstart_steps.step_groups("templates", with_tests=True) == ["templates", "tests"]
    assert quickstart_steps.step_groups("tests,smoke,demo") == ["demo", "smoke", "tests"]


def test_the_smoke_step_is_the_readmes_smoke_sweep():
    (smoke,) = quickstart_steps.plan_steps(["demo", "smoke"], "")[1:]
    assert smoke.command == ("./setup.sh", "run", "./bench.sh", "--smoke") and not smoke.trains
    readme = (ROOT / "README.md").read_text()
    assert "\n./bench.sh --smoke " in readme  # the line it times


# ------------------------------------------------------------------------------------- the commands
def readme_pendulum_line() -> str:
    lines = [
        line
        for line in (ROOT / "README.md").read_text().splitlines()
        if line.startswith("python ppo_linen.py --env Pendulum-v1 ")
    ]
    assert len(lines) == 1, lines
    return lines[0]


def test_dry_run_lists_the_readme_commands_and_runs_nothing(tmp_path):
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.quickstart",
            "--dry-run",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "git clone --quiet" in out and "./setup.sh demo)" in out
    assert f"./setup.sh run {readme_pendulum_line()})" in out
    for framework in ("linen", "nnx", "equinox", "torch"):
        assert (
            f"./setup.sh run python ppo_{framework}.py --env Acrobot-v1 --model-size small)" in out
        )
    assert "./setup.sh test" not in out and not (tmp_path / "out").exists()


FAKE_BIN = {
    "python": 'echo "$@"\n',
    "pip": "",
}  # a .venv whose python echoes, whose pip does nothing


def test_the_demo_task_is_what_setup_sh_demo_trains(tmp_path):
    """The templates run the demo's task: what `./setup.sh demo` runs (setup.sh and its lock files
    in a folder whose .venv's python only echoes its arguments), and what the README says it
    trains."""
    for name in ("setup.sh", "requirements.txt", "requirements.lock"):
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    for name, body in FAKE_BIN.items():
        program = tmp_path / ".venv" / "bin" / name
        program.write_text("#!/bin/sh\n" + body)
        program.chmod(0o755)
    env = {**os.environ, "BENCHBACK_TORCH": "cpu"}  # no nvidia-smi asked
    subprocess.run(["./setup.sh"], cwd=tmp_path, env=env, check=True, capture_output=True)
    demo = subprocess.run(["./setup.sh", "demo"], cwd=tmp_path, env=env, capture_output=True)
    assert demo.returncode == 0, demo.stderr
    words = demo.stdout.decode().split()
    task = ["--env", quickstart_steps.DEMO_ENV, "--model-size", quickstart_steps.DEMO_SIZE]
    assert words[0] == "ppo_nnx.py" and words[1:] == task, words
    assert (
        f"on {quickstart_steps.DEMO_ENV} ({quickstart_steps.DEMO_SIZE} model)"
        in (ROOT / "README.md").read_text()
    )


def test_without_demo_a_plain_setup_runs_first():
    steps = quickstart_steps.plan_steps(["templates"], "")
    assert steps[0] == Step("setup", "setup", ("./setup.sh",), trains=False)
    assert [s.name for s in steps[1:]] == ["linen", "nnx", "equinox", "torch"]


def test_a_readme_without_the_pendulum_block_is_bad_input():
    with pytest.raises(BadInput, match="Continuous control"):
        quickstart_steps.plan_steps(["pendulum"], "# a README\n")


# --------------------------------------------------------------------------------- what is measured
def test_the_compile_time_from_a_synthetic_events_file(tmp_path):
    clone = tmp_path / "clone"
    run_dir = clone / "runs" / "Acrobot-v1__torch__small__compile__1__1700000000"
    write_quickstart_run(run_dir)
    found = quickstart_steps.training([run_dir], clone)
    assert found["compile_s"] == pytest.approx(4.0)
    assert found["iterations"] == 5 and found["total_s"] == 12.5 and found["final_return"] == -84.25
    assert found["run_dir"] == f"runs/{run_dir.name}" and found["versions"] == {"python": "3.11.9"}
    assert quickstart_steps.compile_seconds([3.0]) is None


def test_no_run_folder_or_two_are_an_error_not_a_number(tmp_path):
    assert "0 new run folders" in quickstart_steps.training([], tmp_path)["error"]
    broken = tmp_path / "runs" / "broken"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{}")
    assert "no summary.json" in quickstart_steps.training([broken], tmp_path)["error"]


@pytest.mark.parametrize(
    "seconds, text",
    [
        (None, "-"),
        (4.24, "4.2 s"),
        (55.4, "55 s"),
        (59.6, "1m00s"),
        (178, "2m58s"),
        (3900, "1h05m"),
    ],
)
def test_human_durations(seconds, text):
    assert common.human(seconds) == text


def test_the_steps_environment_reuses_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/somewhere")
    monkeypatch.setenv("VIRTUAL_ENV", "/some/venv")
    monkeypatch.setenv("PIP_CACHE_DIR", "/my/pip")
    env = quickstart.step_environment(tmp_path, pip_cache=False)
    assert "JAX_COMPILATION_CACHE_DIR" not in env and "VIRTUAL_ENV" not in env
    assert env["PIP_CACHE_DIR"] == str(tmp_path / "pip-cache")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "torchinductor-cache")
    if sys.prefix != sys.base_prefix:  # this venv's bin is not on the steps' PATH
        assert str(Path(sys.executable).parent) not in env["PATH"].split(os.pathsep)
    assert quickstart.step_environment(tmp_path, pip_cache=True)["PIP_CACHE_DIR"] == "/my/pip"


# --------------------------------------------------------------------------------------- the README
def record(steps: list[dict], status="finished") -> dict:
    machine = {"cores": 2, "cpu_model": "Test CPU", "virtual_machine": True, "memory_gib": 7.8}
    machine.update(os="Linux-test", python="3.11.9", hostname="h")
    return {
        "command": "python -m benchmarks.quickstart",
        "status": status,
        "started": "2026-12-03T11:00:00+00:00",
        "commit": "0" * 40,
        "machine": machine,
        "caches": {"pip": "empty", "torchinductor": "empty", "jax_compilation": "none"},
        "steps": steps,
    }


def step(name, group, wall, code=0, **more) -> dict:
    return {
        "step": name,
        "group": group,
        "command": f"./setup.sh {name}",
        "wall_s": wall,
        "exit_code": code,
        **more,
    }


MEASURED = [
    step("demo", "demo", 185.0, total_s=55.0, outside_script_s=130.0, final_return=-85.0),
    step("linen", "templates", 50.0, compile_s=4.0, versions={"python": "3.11.9"}),
    step("torch", "templates", 100.0, compile_s=45.0),
    step("pendulum", "pendulum", 52.0, code=1),
    step("smoke", "smoke", 64.0),
]


def block(text: str) -> str:
    return text.split(MARKERS[0])[1].split(MARKERS[1])[0]


def test_the_readme_block_is_rewritten_between_its_markers_only(tmp_path):
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    before = readme.read_text()
    out = tmp_path / "results" / "quickstart"
    out.mkdir(parents=True)
    quickstart_steps.render(out, record(MEASURED), str(readme))
    after = readme.read_text()
    assert after.split(MARKERS[0])[0] == before.split(MARKERS[0])[0]
    assert after.split(MARKERS[1])[1] == before.split(MARKERS[1])[1]
    line = block(after).strip()
    assert line.startswith(
        "Measured from a fresh clone (pip's cache: empty) on 2 cores (Test CPU, a VM; 8 GiB), "
        "2026-12-03"
    )
    assert ", [quiet](results/quickstart/README.md):" in line
    assert "`./setup.sh demo` 3m05s (set-up 2m10s, the run 55 s; final return −85.0)" in line
    assert "linen 50 s, torch 1m40s (of which compile 45 s)" in line
    assert "the Pendulum line failed (exit 1)" in line and "`./setup.sh test` not timed" in line
    assert "`./bench.sh --smoke` 1m04s" in line
    quickstart_steps.render(out, record(MEASURED), str(readme))
    assert readme.read_text() == after  # idempotent
    table = (out / "README.md").read_text()
    assert "| demo " in table and "3m05s" in table and "failed (exit 1)" in table


def test_the_readme_holds_the_tools_block():
    """The README's durations are the tool's: its placeholder, or a line it wrote."""
    text = (ROOT / "README.md").read_text()
    assert text.count(MARKERS[0]) == 1 and text.count(MARKERS[1]) == 1
    line = block(text).strip()
    assert line == PLACEHOLDER or line.startswith("Measured from a fresh clone (")


def test_a_quiet_and_a_loaded_record_give_ranges(tmp_path):
    """With a second record (--with-record), each duration is the range over both, and each
    record's load is named and linked."""
    readme = tmp_path / "README.md"
    readme.write_text(f"top\n{MARKERS[0]}\n{PLACEHOLDER}\n{MARKERS[1]}\n")
    quiet, loaded = tmp_path / "results" / "quiet", tmp_path / "results" / "loaded"
    quiet.mkdir(parents=True)
    loaded.mkdir(parents=True)
    slower = [
        step("demo", "demo", 250.0, total_s=70.0, outside_script_s=180.0, final_return=-85.0),
        step("linen", "templates", 50.0, compile_s=4.0),
        step("torch", "templates", 160.0, compile_s=75.0),
        step("pendulum", "pendulum", 80.0),
    ]
    other = {**record(slower), "busy_loops": 2}
    quickstart_steps.render(quiet, record(MEASURED), str(readme), [(loaded, other)])
    line = block(readme.read_text()).strip()
    assert (
        "[quiet](results/quiet/README.md) and [beside 2 busy loops](results/loaded/README.md)"
        in line
    )
    assert "`./setup.sh demo` 3m05s–4m10s (set-up 2m10s–3m00s, the run 55 s–1m10s" in line
    assert "final return −85.0)" in line
    assert "linen 50 s, torch 1m40s–2m40s (of which compile 45 s–1m15s)" in line
    # a step that failed in one record: the other's time
    assert "the Pendulum line 1m20s" in line
    # a step that one record did not time: said so
    assert "`./bench.sh --smoke` 1m04s (quiet only)" in line
    assert "nothing else running" in (quiet / "README.md").read_text()


def committed_records(readme_text: str) -> list[Path]:
    """The results folders the README's quick-start line links, in its order."""
    links = re.findall(r"\]\(([^)]+)/README\.md\)", block(readme_text))
    return [ROOT / link for link in links]


def test_the_committed_records_render_to_the_committed_readmes(tmp_path):
    """Each results folder the README's line links, rendered again from its quickstart.json, gives
    its README.md, and all of them together the README's block, as committed."""
    text = (ROOT / "README.md").read_text()
    folders = committed_records(text)
    assert folders and folders[0] == ROOT / "results" / "quickstart"
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    others = []
    for folder in folders:
        rendered = tmp_path / folder.relative_to(ROOT)
        rendered.mkdir(parents=True)
        record = json.loads((folder / "quickstart.json").read_text())
        quickstart_steps.render(rendered, record, None)
        assert (rendered / "README.md").read_text() == (folder / "README.md").read_text()
        others.append((rendered, record))
    (first, record), others = others[0], others[1:]
    quickstart_steps.render(first, record, str(readme), others)
    assert readme.read_text() == text


def test_render_only_rewrites_the_readmes_from_quickstart_json(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "quickstart.json").write_text(json.dumps(record(MEASURED)))
    readme = tmp_path / "README.md"
    readme.write_text(f"top\n{MARKERS[0]}\nold\n{MARKERS[1]}\nbottom\n")
    code, err, _ = run_main(capsys, "--render-only", "--out", out, "--update-readme", readme)
    assert code == 0, err
    text = readme.read_text()
    assert text.startswith(f"top\n{MARKERS[0]}\nMeasured ") and text.endswith(
        f"\n{MARKERS[1]}\nbottom\n"
    )
    assert "torch 1m40s" in text and (out / "README.md").is_file()


# --------------------------------------------------------------- the run, in a clone of a fake repo
FAKE_RUN = """import json, sys
from pathlib import Path
from tensorboardX import SummaryWriter
run_dir = Path("runs/Acrobot-v1__nnx__small__cached_partial__1__1700000000")
run_dir.mkdir(parents=True)
(run_dir / "config.json").write_text(json.dumps({"versions": {"python": "3.11.9"}}))
summary = {"status": "completed", "total_s": 0.5, "final_return": -90.0}
(run_dir / "summary.json").write_text(json.dumps(summary))
writer = SummaryWriter(str(run_dir))
for i, seconds in enumerate([5.0, 1.0, 1.5, 0.5, 1.0]):
    writer.add_scalar("time/iteration", seconds, (i + 1) * 64)
writer.close()
"""

FAKE_SETUP = """#!/usr/bin/env bash
cp "{out}/quickstart.json" "{seen}/before-$1.json"
# the busy loops beside this step: the tool's children, as this script is
pgrep -c -P $PPID -f "while True: pass" > "{seen}/busy-$1"
echo "setup.sh $*"
case $1 in
  demo) exec {python} fake_run.py ;;
  fail) exit 3 ;;
esac
"""

FAKE_STEPS = [
    Step("demo", "demo", ("./setup.sh", "demo")),
    Step("linen", "templates", ("./setup.sh", "fail")),
    Step("tests", "tests", ("./setup.sh", "test"), trains=False),
]


def fake_repo(tmp_path: Path, out: Path, seen: Path) -> tuple[Path, str]:
    """A git repository whose setup.sh copies quickstart.json as it is when a step starts, then
    echoes; its demo writes a run folder, its `fail` exits 3. Returns it and its commit."""
    if shutil.which("git") is None:
        pytest.skip("no git")
    repo = tmp_path / "repo"
    repo.mkdir()
    setup = repo / "setup.sh"
    python = shlex.quote(sys.executable)
    setup.write_text(FAKE_SETUP.format(out=out.resolve(), seen=seen, python=python))
    setup.chmod(setup.stat().st_mode | stat.S_IEXEC)
    (repo / "fake_run.py").write_text(FAKE_RUN)
    (repo / "README.md").write_text("# fake\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "fake"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return repo, commit.stdout.strip()


def measure_fake(tmp_path: Path, *more: str) -> tuple[int, Path, Path, str]:
    """The fake repo's steps measured, with --update-readme on tmp_path/README.md (the
    placeholder) and the options more."""
    out, seen = tmp_path / "out", tmp_path / "seen"
    seen.mkdir()
    repo, commit = fake_repo(tmp_path, out, seen)
    work = tmp_path / "work"
    work.mkdir()
    readme = tmp_path / "README.md"
    readme.write_text(f"top\n{MARKERS[0]}\n{PLACEHOLDER}\n{MARKERS[1]}\nbottom\n")
    argv = ["--repo", repo, "--out", out, "--work-dir", work, "--update-readme", readme]
    argv = [str(arg) for arg in [*argv, *more]]
    code = quickstart.measure(
        quickstart.parse_args(argv), argv, plan=lambda groups, readme: FAKE_STEPS
    )
    assert list(work.iterdir()) == []  # the clone is gone
    return code, out, seen, commit


def test_quickstart_json_is_written_after_each_step_and_a_failed_step_does_not_stop_the_others(
    tmp_path,
):
    code, out, seen, commit = measure_fake(tmp_path)
    assert code == 1  # a step failed
    results = json.loads((out / "quickstart.json").read_text())
    assert results["status"] == "finished" and results["commit"] == commit
    assert results["machine"]["cores"] >= 1 and results["caches"]["pip"] == "empty"
    demo, failed, tests = results["steps"]
    assert demo["exit_code"] == 0 and demo["command"] == "./setup.sh demo"
    assert demo["compile_s"] == pytest.approx(4.0) and demo["final_return"] == -90.0
    assert demo["outside_script_s"] == pytest.approx(demo["wall_s"] - 0.5)
    assert failed["exit_code"] == 3 and tests["exit_code"] == 0  # the step after the failure ran
    # what each step found in quickstart.json when it started: the steps before it
    assert [s["step"] for s in json.loads((seen / "before-demo.json").read_text())["steps"]] == []
    after_one = json.loads((seen / "before-fail.json").read_text())
    assert after_one["status"] == "running" and [s["step"] for s in after_one["steps"]] == ["demo"]
    after_two = json.loads((seen / "before-test.json").read_text())["steps"]
    assert [s["exit_code"] for s in after_two] == [0, 3]
    assert (out / "logs" / "demo.log").read_text().startswith("setup.sh demo\n")
    assert "failed (exit 3)" in (out / "README.md").read_text()
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith(f"top\n{MARKERS[0]}\nMeasured from a fresh clone (")
    assert "linen failed (exit 3)" in readme and "[quiet](out/README.md)" in readme
    assert readme.endswith(f"\n{MARKERS[1]}\nbottom\n")
    assert (seen / "busy-demo").read_text().strip() == "0"  # quiet: nothing beside the steps


def test_busy_loops_run_beside_every_step_and_are_recorded(tmp_path):
    code, out, seen, _ = measure_fake(tmp_path, "--busy", "2")
    assert code == 1  # the fake `fail` step
    for name in ("demo", "fail", "test"):
        assert (seen / f"busy-{name}").read_text().strip() == "2"
    results = json.loads((out / "quickstart.json").read_text())
    assert results["busy_loops"] == 2
    assert "beside 2 busy loops" in (out / "README.md").read_text()
    assert "[beside 2 busy loops](out/README.md)" in (tmp_path / "README.md").read_text()
    gone = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "while True: pass"])
    assert gone.returncode == 1  # none left running


@pytest.mark.parametrize("busy", ["-1", "two", "65", "", "²"])
def test_a_bad_busy_count_is_one_line_and_exit_2(tmp_path, capsys, busy):
    code, err, _ = run_main(capsys, "--busy", busy, "--out", tmp_path / "out")
    assert code == 2 and len(err) == 1 and "--busy" in err[0] and repr(busy) in err[0]
    assert "0 to 64" in err[0]
    assert not (tmp_path / "out").exists()


def test_with_record_needs_the_readme_and_a_record_of_this_tool(tmp_path, capsys):
    code, err, _ = run_main(capsys, "--with-record", tmp_path, "--out", tmp_path / "out")
    assert code == 2 and "only with --update-readme" in err[0]
    readme = tmp_path / "README.md"
    readme.write_text(f"{MARKERS[0]}\n{MARKERS[1]}\n")
    argv = ["--with-record", tmp_path, "--update-readme", readme, "--out", tmp_path / "out"]
    code, err, _ = run_main(capsys, *argv)
    assert code == 2 and len(err) == 1 and f"--with-record {tmp_path}" in err[0]
    assert not (tmp_path / "out").exists()


def test_ctrl_c_keeps_what_was_measured(tmp_path, monkeypatch):
    real_wait = subprocess.Popen.wait

    def interrupted_at_fail(proc, timeout=None):
        """Ctrl-C while the `fail` step runs (once: the wait after the kill is real)."""
        if list(proc.args) == ["./setup.sh", "fail"] and not hasattr(proc, "hit"):
            proc.hit = True
            raise KeyboardInterrupt
        return real_wait(proc, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", interrupted_at_fail)
    code, out, seen, _ = measure_fake(tmp_path)
    assert code == 130
    results = json.loads((out / "quickstart.json").read_text())
    assert results["status"] == "interrupted"
    assert [(s["step"], s["exit_code"], s.get("interrupted")) for s in results["steps"]] == [
        ("demo", 0, None),
        ("linen", None, True),
    ]
    assert not (seen / "before-test.json").exists()  # nothing ran after Ctrl-C
    assert PLACEHOLDER in (tmp_path / "README.md").read_text()  # left as it was
    assert "status interrupted" in (out / "README.md").read_text()


def test_a_test_steps_pytest_counts_are_read_from_its_log_and_stated(tmp_path):
    log = tmp_path / "tests.log"
    log.write_text(
        "....F..\n= short test summary info =\nFAILED tests/test_x.py::test_y\n"
        "1 failed, 1586 passed, 8 skipped, 90 warnings in 3685.49s (1:01:25)\n"
    )
    assert quickstart_steps.pytest_counts(log) == "1 failed, 1586 passed, 8 skipped"
    (tmp_path / "empty.log").write_text("no summary here\n")
    assert quickstart_steps.pytest_counts(tmp_path / "empty.log") is None
    result = step("tests", "tests", 3690.0, code=1)
    result = quickstart_steps.with_pytest_counts(result, log)
    line = quickstart_steps.readme_line([("out/README.md", record([result]))])
    assert "`./setup.sh test` 1h01m (1 failed, 1586 passed, 8 skipped)" in line

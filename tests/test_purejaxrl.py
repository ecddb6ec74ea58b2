"""benchmarks/purejaxrl.py: its refusals of bad input, its schedule and commands, a child's peak
memory, the report rendered from a given measurement set (no timing asserted), and, where a
PureJaxRL checkout is given (BENCHBACK_PUREJAXRL_DIR; CI has none), PureJaxRL's side run on a tiny
configuration."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import purejaxrl, purejaxrl_runs
from benchmarks.purejaxrl_runs import PUREJAXRL, Child, Plan, Setting
from helpers import ROOT


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A stand-in for a PureJaxRL checkout: what the options check for (its purejaxrl/ppo.py)."""
    (tmp_path / "pjx" / "purejaxrl").mkdir(parents=True)
    (tmp_path / "pjx" / "purejaxrl" / "ppo.py").write_text("# stand-in\n")
    return tmp_path / "pjx"


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "args, said",
    [
        (["--rounds", "0"], "--rounds 0: give 1 or more"),
        (["--agents", "4", "0"], "--agents 0: give numbers of agents of 1 or more"),
        (["--iterations", "3"], "--iterations 3: give 10 or more"),
        (["--iterations", "0"], "--iterations 0: give 10 or more"),
        (["--timeout", "-1"], "--timeout -1.0: give a positive number"),
        (["--mode", "whole", "--agents", "4"], "--agents: only with --mode scaling"),
        (["--mode", "whole", "--fast-only"], "--fast-only: only with --mode scaling"),
        (["--configs", "large"], "invalid choice: 'large'"),
        (["--scripts", "torch"], "invalid choice: 'torch'"),
        (["--purejaxrl-python", "/no/python"], "--purejaxrl-python /no/python: no such"),
        (["--agents", "x"], "invalid int value: 'x'"),
        (["--cpus", "0"], "--cpus 0: give 1 to"),
        (["--cpus", "100000"], "--cpus 100000: give 1 to"),
    ],
)
def test_bad_input_is_refused_in_one_line_before_anything_is_made(
    checkout, tmp_path, capsys, args, said
):
    out, work = tmp_path / "out" / "r.json", tmp_path / "work"
    argv = ["--purejaxrl-dir", str(checkout), "--out", str(out), "--work-dir", str(work), *args]
    assert purejaxrl.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err and len(err.strip().splitlines()) == 1
    assert not out.parent.exists() and not work.exists()


def test_a_folder_without_purejaxrls_ppo_is_refused(tmp_path, capsys):
    assert purejaxrl.main(["--purejaxrl-dir", str(tmp_path)]) == 2
    assert "no purejaxrl/ppo.py in it" in capsys.readouterr().err
    assert purejaxrl.main([]) == 2  # the checkout is required
    assert "--purejaxrl-dir" in capsys.readouterr().err


def test_help_says_both_modes_and_exits_0(capsys):
    with pytest.raises(SystemExit) as stop:
        purejaxrl.main(["--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert "--mode whole" in text and "--num-agents N" in text


def options(checkout, *args):
    argv = ["--purejaxrl-dir", str(checkout), *args]
    return purejaxrl.checked(purejaxrl.parser().parse_args(argv), gpu=False)


def test_each_mode_has_its_defaults(checkout):
    scaling = options(checkout)
    assert scaling.agents == [1, 4, 16, 64] and scaling.configs == ["cleanrl", "ours"]
    assert scaling.scripts == ["linen", "nnx", "equinox"] and scaling.iterations == 10
    assert scaling.out.endswith("purejaxrl_scaling_cpu.json")
    whole = options(checkout, "--mode", "whole")
    assert whole.agents == [1] and whole.configs == ["ours"] and whole.scripts == ["linen"]
    assert whole.iterations == 100 and whole.rounds == 3


def test_cpus_pins_the_process_and_what_it_starts_to_the_first_cores(checkout):
    # in a child, so that this test process keeps its cores; the child's own child reports
    first = sorted(os.sched_getaffinity(0))[0]
    code = (
        "import os, subprocess, sys\n"
        "from benchmarks import purejaxrl\n"
        "purejaxrl.pin(1)\n"
        "report = 'import os; print(sorted(os.sched_getaffinity(0)))'\n"
        "subprocess.run([sys.executable, '-c', report], check=True)\n"
    )
    child = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == f"[{first}]"
    assert options(checkout, "--cpus", "1").cpus == 1


# ---------------------------------------------------------------------------- what runs, and how
def test_the_sides_alternate_round_by_round_and_every_cell_has_each_once(checkout):
    opts = options(checkout, "--agents", "1", "2", "--configs", "cleanrl", "--rounds", "2")
    order = purejaxrl.schedule(opts)
    sides = [PUREJAXRL, "linen", "nnx", "equinox"]
    first = [side for r, config, n, side in order if r == 0 and n == 1]
    second = [side for r, config, n, side in order if r == 1 and n == 1]
    assert first == sides and second == sides[1:] + sides[:1]
    assert len(order) == 2 * 2 * 4


def plan(tmp_path) -> Plan:
    return Plan(12, 60, tmp_path, "/venv/bin/python", tmp_path / "pjx")


def test_both_sides_run_the_same_configuration_and_agents(tmp_path):
    cleanrl = purejaxrl_runs.SETTINGS["cleanrl"]
    ours = purejaxrl_runs.command(plan(tmp_path), "nnx", cleanrl, 16, tmp_path / "runs")
    theirs = purejaxrl_runs.command(plan(tmp_path), PUREJAXRL, cleanrl, 16, tmp_path / "runs")
    shared = ["--num-envs", "4", "--num-steps", "128", "--update-epochs", "4"]
    for cmd in (ours, theirs):
        assert " ".join(shared + ["--num-minibatches", "4"]) in " ".join(cmd)
    assert ours[1] == str(ROOT / "ppo_nnx.py") and "--no-sync-timing" not in ours
    assert ours[ours.index("--num-agents") + 1] == "16"
    assert ours[ours.index("--num-iterations") + 1] == "12"
    assert theirs[:2] == ["/venv/bin/python", str(purejaxrl_runs.DRIVER)]
    assert theirs[theirs.index("--agents") + 1] == "16" and "--whole" not in theirs


def test_the_whole_process_is_run_as_a_user_runs_it(tmp_path):
    ours_setting = purejaxrl_runs.SETTINGS["ours"]
    ours = purejaxrl_runs.command(plan(tmp_path), "linen", ours_setting, 1, tmp_path, whole=True)
    theirs = purejaxrl_runs.command(plan(tmp_path), PUREJAXRL, ours_setting, 1, tmp_path, True)
    assert "--no-sync-timing" in ours and "--num-agents" not in ours
    assert "--whole" in theirs and theirs[theirs.index("--num-envs") + 1] == "32"


def test_each_template_is_also_run_as_a_user_trains_and_its_rate_is_over_whole_calls(tmp_path):
    """A template's scaling run is followed by the same with --no-sync-timing (the fast path): its
    rate counts iterations 1+ from the end of iteration 0 (a call of its own) to the last one's."""
    cleanrl = purejaxrl_runs.SETTINGS["cleanrl"]
    steady = purejaxrl_runs.command(plan(tmp_path), "linen", cleanrl, 16, tmp_path / "runs")
    fast = purejaxrl_runs.command(plan(tmp_path), "linen", cleanrl, 16, tmp_path, fast=True)
    assert fast[: fast.index("--log-dir")] == steady[: steady.index("--log-dir")]
    assert fast[-1] == "--no-sync-timing" and "--no-sync-timing" not in steady
    # 4 iterations, the first (the compile) ending at 10 s; calls of 1 then 2 after it
    run = {"series": {"time/elapsed": np.array([10.0, 10.5, 11.0, 11.0])}}
    assert purejaxrl_runs.fast_rate(run, 100) == pytest.approx(3 * 100 / 1.0)
    with pytest.raises(purejaxrl_runs.RunFailed):
        purejaxrl_runs.fast_rate({"series": {"time/elapsed": np.array([10.0])}}, 100)


def test_fast_only_runs_each_template_once_as_a_user_trains(tmp_path, monkeypatch):
    """--fast-only (a chip lent by the minute): a template's scaling run is its --no-sync-timing
    run alone, PureJaxRL's is unchanged, and the run's line gives the rate it measured."""
    started = []

    def process(plan, side, setting, agents, log_name, whole, fast=False):
        started.append((side, fast))
        result = {"wall_s": 9.0, "peak_rss_bytes": 600 * 2**20, "log": log_name}
        return {**result, "fast_sps": 320.0} if fast else {**result, "steady_sps": 100.0}

    monkeypatch.setattr(purejaxrl_runs, "run_process", process)
    cleanrl = purejaxrl_runs.SETTINGS["cleanrl"]
    fast_plan = Plan(12, 60, tmp_path, "/venv/bin/python", tmp_path / "pjx", fast_only=True)
    ours = purejaxrl_runs.run_one(fast_plan, "linen", cleanrl, 4, "l.log", whole=False)
    theirs = purejaxrl_runs.run_one(fast_plan, PUREJAXRL, cleanrl, 4, "p.log", whole=False)
    assert started == [("linen", True), (PUREJAXRL, False)]
    assert "steady_sps" not in ours and theirs["steady_sps"] == 100.0
    line = "with --no-sync-timing, 320 agent-steps/s over whole iterations, peak 600 MiB"
    assert purejaxrl.outcome(ours) == line
    started.clear()
    purejaxrl_runs.run_one(plan(tmp_path), "linen", cleanrl, 4, "l.log", whole=False)
    assert started == [("linen", False), ("linen", True)]


def test_purejaxrls_steady_rate_is_its_timed_runs_agent_steps(tmp_path):
    line = json.dumps({"import_s": 3.0, "compile_s": 4.0, "train_s": 2.0, "total_s": 12.0})
    child = Child(0, 13.0, 600 * 2**20, f"Failed to import warp\n{line}\n")
    setting = Setting(4, 128, 4, 4)
    result = purejaxrl_runs.purejaxrl_result(child, setting, 16, 12, whole=False)
    # 16 agents x 12 iterations x 512 steps in 2 s
    assert result["steady_sps"] == 16 * 12 * 512 / 2.0
    assert result["peak_rss_bytes"] == 600 * 2**20 and result["compile_s"] == 4.0
    with pytest.raises(purejaxrl_runs.RunFailed, match="no JSON result"):
        purejaxrl_runs.purejaxrl_result(Child(0, 1.0, 0, "Traceback"), setting, 1, 12, False)


def test_a_childs_peak_memory_is_its_own(tmp_path):
    # held a moment: the peak is sampled every 20 ms while the child runs, and a child that exits
    # as soon as its memory is touched can leave before the last sample sees all of it
    grow = "\n".join(
        [
            "import time",
            "b = bytearray(300 * 2**20)",
            "b[::4096] = b'x' * len(b[::4096])",
            "time.sleep(0.3)",
        ]
    )
    child = purejaxrl_runs.run_child(
        [sys.executable, "-c", grow], tmp_path, dict(os.environ), tmp_path / "a.log", 60
    )
    small = purejaxrl_runs.run_child(
        [sys.executable, "-c", "pass"], tmp_path, dict(os.environ), tmp_path / "b.log", 60
    )
    assert child.returncode == 0 and small.returncode == 0
    # the second child's peak is its own, not the largest of every child waited for so far
    assert child.peak_rss_bytes > 300 * 2**20 > small.peak_rss_bytes


def test_a_child_past_its_timeout_is_killed(tmp_path):
    cmd = [sys.executable, "-c", "print('started', flush=True); import time; time.sleep(60)"]
    child = purejaxrl_runs.run_child(cmd, tmp_path, dict(os.environ), tmp_path / "c.log", 0.5)
    assert child.returncode is None and child.wall_s < 10 and "started" in child.output
    assert "killed after" in purejaxrl_runs.failure(child, 0.5)


# ---------------------------------------------------------------------------------- the report
FAILED = {"error": "exit status 2: ...", "log": "r.log"}


def run(side, n, sps, memory_mib, config="cleanrl", r=1) -> dict:
    return {
        "round": r,
        "config": config,
        "agents": n,
        "side": side,
        "steady_sps": sps,
        "peak_rss_bytes": memory_mib * 2**20,
        "wall_s": 10.0,
        "log": "r.log",
    }


def record(mode: str, runs: list[dict], scripts=("linen", "nnx")) -> dict:
    return {
        "command": f"python -m benchmarks.purejaxrl --mode {mode}",
        "status": "finished",
        "started": "2026-12-05T00:00:00+00:00",
        "machine": {"cores": 2, "cpu_model": "AMD EPYC", "virtual_machine": True, "memory_gib": 24},
        "options": {
            "mode": mode,
            "rounds": 3,
            "iterations": 10 if mode == "scaling" else 100,
            "agents": [1, 4] if mode == "scaling" else [1],
            "configs": ["cleanrl"] if mode == "scaling" else ["ours"],
            "scripts": list(scripts),
        },
        "purejaxrl": {"dir": "/pjx", "commit": purejaxrl_runs.PUREJAXRL_COMMIT, "modified": False},
        "versions": {PUREJAXRL: {"jax": "0.4.35"}, "ours": {"jax": "0.10.2"}},
        "commands": {"linen (cleanrl, N=1)": [sys.executable, str(ROOT / "ppo_linen.py")]},
        "rounds_done": 3,
        "runs": runs,
    }


SCALING = [
    *(run(PUREJAXRL, 1, sps, 500, r=r) for r, sps in ((1, 100.0), (2, 120.0), (3, 110.0))),
    *(run("linen", 1, sps, 600, r=r) for r, sps in ((1, 160.0), (2, 170.0), (3, 165.0))),
    run(PUREJAXRL, 4, 400.0, 520),
    run("linen", 4, 300.0, 640),
    run("nnx", 1, 220.0, 700),
    {**FAILED, "config": "cleanrl", "agents": 4, "side": "nnx", "round": 1},
]


def table_rows(text: str, title: str) -> dict[tuple, list[str]]:
    """The rows of the table under title, by (configuration, N)."""
    block = text.split(title)[1].split("\n\n")[1].splitlines()[2:]
    cells = [line.strip("| ").split(" | ") for line in block]
    return {(row[0], row[1]): row[2:] for row in cells}


def test_the_scaling_report_gives_medians_ratios_and_memory_per_agent():
    text = purejaxrl.markdown(record("scaling", SCALING))
    rates = table_rows(text, "Steady agent-steps per second")
    # linen's median 165 over PureJaxRL's 110; nnx's one run over PureJaxRL's
    assert rates[("cleanrl", "1")] == ["110", "165 (1.50x)", "220 (2.00x)"]
    assert rates[("cleanrl", "4")] == ["400", "300 (0.75x)", "-"]
    memory = table_rows(text, "Peak memory per agent")
    assert memory[("cleanrl", "4")] == ["130.0", "160.0 (1.23x)", "-"]
    assert "- linen: not met at cleanrl N=4 (0.75x)" in text
    assert "- nnx: met (1 cells measured)" in text
    assert purejaxrl_runs.PUREJAXRL_COMMIT in text and "jax 0.4.35" in text
    assert " ppo_linen.py`" in text and f"{ROOT}/" not in text  # paths inside it: relative
    assert "pinned" not in text
    pinned = record("scaling", SCALING)
    pinned["options"]["cpus"] = 1
    assert "every run pinned to 1 of them (--cpus)" in purejaxrl.markdown(pinned)


def test_the_scaling_report_gives_ours_as_a_user_trains_beside_the_steady_rate():
    """The fast path's rate (fast_sps) in a table of its own, over PureJaxRL's steady rate, and the
    target read from it where it was measured."""
    fast = [
        {**r, "fast_sps": 2 * r["steady_sps"]} if r.get("side") == "linen" else r for r in SCALING
    ]
    text = purejaxrl.markdown(record("scaling", fast))
    rows = table_rows(text, "As a user trains")
    assert rows[("cleanrl", "1")] == ["110", "330 (3.00x)", "-"]
    assert rows[("cleanrl", "4")] == ["400", "600 (1.50x)", "-"]
    # the steady table stays the steady rate
    assert table_rows(text, "Steady agent-steps per second")[("cleanrl", "4")][1] == "300 (0.75x)"
    assert "- linen: met (2 cells measured)" in text and "- nnx: met (1 cells measured)" in text
    assert purejaxrl.outcome(fast[3]) == (
        "steady 160 agent-steps/s (with --no-sync-timing, over whole iterations: 320), peak 600 MiB"
    )


def test_the_whole_process_report_gives_the_ratio_and_the_target():
    def whole(side, wall, memory_mib, r):
        parts = {"import_s": 3.0, "setup_s": 4.5 if side == "linen" else 7.0}
        parts.update({"iter0_s": 5.5} if side == "linen" else {"compile_s": 4.0})
        return {**run(side, 1, None, memory_mib, "ours", r), "wall_s": wall, **parts}

    runs = [
        *(whole(PUREJAXRL, wall, 793, r) for r, wall in ((1, 17.1), (2, 16.9), (3, 17.6))),
        *(whole("linen", wall, 864, r) for r, wall in ((1, 20.0), (2, 19.7), (3, 20.2))),
    ]
    text = purejaxrl.markdown(record("whole", runs, scripts=["linen"]))
    assert "| whole process, s | 17.1 | 20.0 (1.17x) |" in text
    assert "| peak memory, MiB | 793 | 864 (1.09x) |" in text
    assert "within 1.05x of PureJaxRL's: not met (1.17x)" in text
    assert "linen 19.7-20.2 s" in text
    # where each side's time to its first iteration goes
    assert "| start to iteration 0, s | 7.00 | 4.50 |" in text
    assert "| iteration 0 (its compile), s | - | 5.50 |" in text
    assert "| compile, s | 4.00 | - |" in text
    faster = [{**r, "wall_s": 17.0} if r["side"] == "linen" else r for r in runs]
    assert ": met (0.99x)" in purejaxrl.markdown(record("whole", faster, scripts=["linen"]))


def test_a_run_is_told_in_one_line():
    assert purejaxrl.outcome(run("linen", 4, 1234.4, 600)) == (
        "steady 1234 agent-steps/s, peak 600 MiB"
    )
    assert purejaxrl.outcome(FAILED) == "failed (exit status 2: ...; log r.log)"


# ----------------------------------------------------------------- PureJaxRL's side, for real
def purejaxrl_setup(tmp_path, shims: bool) -> Plan:
    checkout = os.environ.get("BENCHBACK_PUREJAXRL_DIR", "")
    if not Path(checkout, purejaxrl_runs.PPO).is_file():
        pytest.skip("no PureJaxRL checkout: set BENCHBACK_PUREJAXRL_DIR to one (CI has none)")
    if shims:
        python = sys.executable
    else:
        python = os.environ.get("BENCHBACK_PUREJAXRL_PYTHON") or str(
            purejaxrl_runs.ensure_venv(ROOT / "runs" / "purejaxrl" / "venv")
        )
    return Plan(3, 300, tmp_path, python, Path(checkout).resolve(), shims)


@pytest.mark.slow
@pytest.mark.parametrize("shims", [False, True])
@pytest.mark.parametrize("whole", [False, True])
def test_purejaxrls_side_trains_a_tiny_configuration(tmp_path, whole, shims):
    plan = purejaxrl_setup(tmp_path, shims)
    tiny = Setting(4, 16, 2, 2)
    result = purejaxrl_runs.run_one(plan, PUREJAXRL, tiny, 1 if whole else 2, "pjx.log", whole)
    assert "error" not in result, result
    assert result["peak_rss_bytes"] > 0 and result["import_s"] < result["total_s"]
    if whole:
        assert "final_return" in result and "train_s" not in result
    else:
        assert result["steady_sps"] > 0 and result["compile_s"] > 0


def test_a_peers_venv_is_made_once_and_a_failed_step_is_one_line(tmp_path):
    """benchmarks.common.stamped_venv (PureJaxRL's and LeanRL's venvs): set up once, its stamp
    then says so; a failing install command raises the given error with its last line."""
    from benchmarks.common import stamped_venv

    def failing(python):
        return [[str(python), "-c", "import sys; sys.exit('no such wheel')"]]

    with pytest.raises(purejaxrl_runs.SetupError, match="no such wheel"):
        stamped_venv(tmp_path / "venv", "v1\n", failing, purejaxrl_runs.SetupError, "a venv")
    made = stamped_venv(tmp_path / "venv", "v1\n", lambda python: [], ValueError, "a venv")
    assert made.is_file()
    # done: nothing runs again, not even a failing command
    assert stamped_venv(tmp_path / "venv", "v1\n", failing, ValueError, "a venv") == made


# ----------------------------------------------------- PureJaxRL on our JAX (--shims), no venv
# a stand-in checkout whose ppo.py and wrappers.py import and use what PureJaxRL's do, which our
# environment lacks or has at another version: distrax, chex, brax, navix, gymnax 0.0.x's step
STAND_IN_WRAPPERS = """
import chex
from brax import envs
from brax.envs.wrappers.training import EpisodeWrapper, AutoResetWrapper
import navix as nx


def annotated(key: chex.PRNGKey) -> chex.Array:
    return key
"""
STAND_IN_PPO = """
import distrax
import gymnax
import jax
import jax.numpy as jnp
from wrappers import annotated


def make_train(config):
    env, env_params = gymnax.make(config["ENV_NAME"])

    def train(key):
        obs, state = env.reset(annotated(key), env_params)
        pi = distrax.Categorical(logits=jnp.zeros(env.num_actions))
        action = pi.sample(seed=key)
        obs, state, reward, done, info = env.step(key, state, action, env_params)
        returns = reward + pi.log_prob(action) + pi.entropy() + done
        return {"metrics": {"returned_episode_returns": jnp.full(10, returns)}}

    return train
"""


def test_the_shims_stand_in_for_what_our_environment_lacks():
    code = """
import sys
sys.path.insert(0, "benchmarks")
import purejaxrl_shims
done = purejaxrl_shims.install()
import chex, distrax, gymnax, jax, navix
import jax.numpy as jnp
from brax.envs.wrappers.training import AutoResetWrapper
env, params = gymnax.make("CartPole-v1")
obs, state = env.reset(jax.random.key(0), params)
step = env.step(jax.random.key(1), state, 0, params)
pi = distrax.Categorical(logits=jnp.zeros(4))
print(len(step), env.num_actions, float(pi.log_prob(jnp.asarray(2))), float(pi.entropy()))
print(hasattr(chex, "PRNGKey"), "distrax.Categorical (sample, log_prob, entropy)" in done)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    sizes, checks = done.stdout.splitlines()[-2:]
    length, actions, log_prob, entropy = sizes.split()
    assert (length, actions) == ("5", "2")
    # a uniform policy over 4 actions
    assert abs(float(log_prob) + np.log(4)) < 1e-6 and abs(float(entropy) - np.log(4)) < 1e-6
    assert checks == "True True"


def test_the_five_value_step_is_done_when_terminated_or_truncated():
    from benchmarks import purejaxrl_shims

    class SixValues:
        num_actions = 3

        def step(self, key, state, action, params=None):
            return (
                "obs",
                state,
                1.0,
                np.array([True, False, False]),
                np.array([False, True, False]),
                {},
            )

    env = purejaxrl_shims.FiveValueStep(SixValues())
    obs, state, reward, done, info = env.step(None, "s", 0)
    assert done.tolist() == [True, True, False] and env.num_actions == 3


def test_the_sample_follows_the_logits():
    import jax
    import jax.numpy as jnp

    from benchmarks import purejaxrl_shims

    pi = purejaxrl_shims.Categorical(logits=jnp.log(jnp.asarray([0.05, 0.9, 0.05])))
    keys = jax.random.split(jax.random.key(0), 2000)
    samples = np.asarray(jax.vmap(lambda key: pi.sample(seed=key))(keys))
    assert 0.85 < (samples == 1).mean() < 0.95


@pytest.mark.parametrize("whole", [False, True])
def test_the_driver_runs_a_purejaxrl_shaped_checkout_on_our_jax_with_shims(tmp_path, whole):
    (tmp_path / "pjx" / "purejaxrl").mkdir(parents=True)
    (tmp_path / "pjx" / "purejaxrl" / "ppo.py").write_text(STAND_IN_PPO)
    (tmp_path / "pjx" / "purejaxrl" / "wrappers.py").write_text(STAND_IN_WRAPPERS)
    plan = Plan(3, 300, tmp_path, sys.executable, tmp_path / "pjx", shims=True)
    tiny = Setting(4, 16, 2, 2)
    cmd = purejaxrl_runs.command(plan, PUREJAXRL, tiny, 1, tmp_path, whole)
    assert cmd[0] == sys.executable and "--shims" in cmd
    result = purejaxrl_runs.run_one(plan, PUREJAXRL, tiny, 1 if whole else 2, "pjx.log", whole)
    assert "error" not in result, result
    assert result["compile_s"] > 0 and result["import_s"] < result["total_s"]


def test_shims_run_on_this_interpreter_not_another(checkout, tmp_path, capsys):
    argv = ["--purejaxrl-dir", str(checkout), "--shims", "--purejaxrl-python", sys.executable]
    assert purejaxrl.main([*argv, "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert "not with --shims" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("layout", ["branch file", "packed refs", "detached"])
def test_the_commit_is_read_from_dot_git_where_git_is_not_installed(checkout, monkeypatch, layout):
    commit = "0123456789abcdef0123456789abcdef01234567"
    git_dir = checkout / ".git"
    (git_dir / "refs" / "heads").mkdir(parents=True)
    if layout == "detached":
        (git_dir / "HEAD").write_text(commit + "\n")
    else:
        (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    if layout == "branch file":
        (git_dir / "refs" / "heads" / "main").write_text(commit + "\n")
    if layout == "packed refs":
        (git_dir / "packed-refs").write_text(f"# pack-refs\n{'f' * 40} refs/heads/old\n")
        with open(git_dir / "packed-refs", "a") as file:
            file.write(f"{commit} refs/heads/main\n")
    monkeypatch.setattr(purejaxrl_runs.shutil, "which", lambda name: None)
    found = purejaxrl_runs.checkout_commit(checkout)
    assert found == {"commit": commit, "modified": None}


def test_a_checkout_without_dot_git_is_refused_where_git_is_not_installed(checkout, monkeypatch):
    monkeypatch.setattr(purejaxrl_runs.shutil, "which", lambda name: None)
    with pytest.raises(purejaxrl_runs.SetupError, match="not a git checkout"):
        purejaxrl_runs.checkout_commit(checkout)


def test_the_sources_say_where_purejaxrl_ran_and_what_is_unknown():
    venv = purejaxrl.sources_text(record("whole", []))
    assert "PureJaxRL's venv: jax 0.4.35" in venv and "differs" not in venv
    shimmed = record("whole", [])
    shimmed["options"]["shims"] = True
    shimmed["purejaxrl"]["modified"] = None
    text = purejaxrl.sources_text(shimmed)
    assert "PureJaxRL on our interpreter, with benchmarks/purejaxrl_shims.py's stand-ins" in text
    assert "is unknown: no git there" in text


def test_a_run_on_this_interpreter_keeps_pythonpath_and_one_in_purejaxrls_venv_does_not(
    tmp_path, monkeypatch
):
    # the TPU runner puts the packages its machine lacks on PYTHONPATH: our side (and PureJaxRL's
    # with --shims, on our interpreter) needs them; PureJaxRL's own venv must not see ours
    monkeypatch.setenv("PYTHONPATH", "/carried/wheels")
    ours = purejaxrl_runs.run_environment(tmp_path, own_interpreter=True)
    theirs = purejaxrl_runs.run_environment(tmp_path, own_interpreter=False)
    assert ours["PYTHONPATH"] == "/carried/wheels"
    assert "PYTHONPATH" not in theirs
    assert ours["JAX_COMPILATION_CACHE_DIR"] == theirs["JAX_COMPILATION_CACHE_DIR"] == ""


def test_a_machine_that_reports_no_peak_memory_gets_no_ratio_and_no_crash():
    # gVisor (the TPU machine) reports no VmHWM: a base of 0 once stopped the run at its table
    assert purejaxrl.cell_text((5.0, 2), (0.0, 2)) == "5"
    assert purejaxrl.cell_text((5.0, 2), (2.5, 2)) == "5 (2.00x)"
    result = {"wall_s": 33.8, "peak_rss_bytes": None}
    assert purejaxrl.outcome(result) == "whole process 34 s, peak memory unknown"

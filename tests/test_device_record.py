"""What a run says it ran on (config.json, summary.json): the device kind, the jaxlib and backend
versions, the matmul precision in force (--matmul-precision), the device's peak memory, the compile
time of the first iteration per jitted function, and one line when another process holds the TPU.
No accelerator is needed: a TPU is faked by monkeypatching jax.devices."""

import ast
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import pytest
from script_runs import FAST_COMPILE

import bookkeeping
from core import run_checks
from core.plain_bookkeeping import PlainBook
from helpers import ROOT, STUDY, TINY, only_run_dir, read_json, run_script
from tools.starter import write_starter

# libtpu's words when a second process starts on a chip that another holds
TPU_HELD = (
    "Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process with pid "
    "4242. Not attempting to load libtpu.so in this process.\n  File ..., line 1\n    more"
)


def fake_tpu(memory_stats=None):
    """A device as JAX describes a TPU v5e chip."""
    client = SimpleNamespace(platform_version="PJRT C API\nTFRT TPU v5 lite\nBuilt on Jan 1 2026")
    return SimpleNamespace(
        device_kind="TPU v5 lite",
        platform="tpu",
        client=client,
        memory_stats=lambda: memory_stats,
    )


# ------------------------------------------------------------------------------ the TPU held
def test_a_tpu_held_by_another_process_is_refused_in_one_line(monkeypatch, capsys):
    def devices():
        raise RuntimeError(TPU_HELD)

    monkeypatch.setattr(run_checks.jax, "devices", devices)
    with pytest.raises(ValueError, match="in use by another process") as raised:
        run_checks.check_environment()
    assert "\n" not in str(raised.value)
    # a script's first lines: exit code 2 and that one line, no traceback
    with pytest.raises(SystemExit) as stopped:
        bookkeeping.exit_on_bad_environment("torch")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "TPU is in use by another process" in err


def test_another_start_failure_still_names_jax_platforms(monkeypatch):
    def devices():
        raise RuntimeError("Unknown backend: 'tpu' requested, but no platforms are 'tpu'")

    monkeypatch.setattr(run_checks.jax, "devices", devices)
    with pytest.raises(ValueError, match="JAX_PLATFORMS=.*cannot start on it here"):
        run_checks.check_environment()


# --------------------------------------------------------------------- the device and versions
def test_the_accelerator_is_recorded_with_its_kind_and_versions(monkeypatch):
    monkeypatch.setattr(run_checks.jax, "devices", lambda: [fake_tpu()])
    monkeypatch.setattr(run_checks.jax, "device_count", lambda: 1)
    installed = {"jaxlib": "0.10.2", "libtpu": "0.0.21"}
    monkeypatch.setattr(run_checks, "installed_version", installed.get)
    record = run_checks.accelerator()
    assert record["device_name"] == "TPU v5 lite" and record["device_platform"] == "tpu"
    assert record["jaxlib"] == "0.10.2"
    assert record["backend_packages"] == {"libtpu": "0.0.21"}
    assert "TFRT TPU v5 lite" in record["backend_version"]


def test_config_json_records_the_versions_of_the_envs_own_packages(tmp_path):
    """A Playground run's config.json named no playground, brax, mujoco or mujoco-mjx version;
    now the env's own packages are recorded, and a gymnax run's names none of them."""
    from importlib.metadata import version

    physics = ("playground", "brax", "mujoco", "mujoco-mjx")
    recorded = {}
    for env in ("playground-CartpoleBalance", "brax-ant", "CartPole-v1"):
        run_dir = tmp_path / env
        run_dir.mkdir()
        config = {"num_iterations": 1, "env": env, "env_backend": "gymnax"}
        bookkeeping.Bookkeeping(0.0, packages=("numpy",)).start(config, str(run_dir))
        recorded[env] = read_json(run_dir / "config.json")["versions"]
    assert {name: recorded["playground-CartpoleBalance"][name] for name in physics} == {
        name: version(name) for name in physics
    }
    assert {"brax", "mujoco", "mujoco-mjx"} <= set(recorded["brax-ant"])
    assert "playground" not in recorded["brax-ant"]
    assert not set(physics) & set(recorded["CartPole-v1"]) and "numpy" in recorded["CartPole-v1"]


def test_peak_device_bytes_come_from_the_device_memory_statistics(monkeypatch):
    stats = {"peak_bytes_in_use": 123_456_789, "bytes_limit": 16 * 2**30}
    monkeypatch.setattr(bookkeeping.jax, "devices", lambda: [fake_tpu(stats)])
    assert bookkeeping.peak_device_bytes() == 123_456_789
    # a CPU keeps none: the host's peak (peak_rss_bytes) holds it all
    monkeypatch.setattr(bookkeeping.jax, "devices", lambda: [fake_tpu(None)])
    assert bookkeeping.peak_device_bytes() is None


# ------------------------------------------------------------------------ the matmul precision
def precision_calls(text: str) -> list[str]:
    """The calls in a Python source that set a float32 matmul precision (JAX's or torch's)."""
    calls = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Call)]
    return [
        ast.unparse(call)
        for call in calls
        if "set_float32_matmul_precision" in ast.unparse(call.func)
        or (ast.unparse(call.func) == "jax.config.update" and "matmul" in ast.unparse(call))
    ]


@pytest.mark.parametrize("framework", list(STUDY.frameworks))
def test_the_template_sets_the_matmul_precision_and_the_bookkeeping_only_records_it(framework):
    """--matmul-precision shapes the run: the template sets it, where it sets its other options, so
    that its copy trains as it does; bookkeeping.py changes nothing (it records it)."""
    assert precision_calls((ROOT / "bookkeeping.py").read_text()) == []
    calls = precision_calls((ROOT / STUDY.frameworks[framework].script).read_text())
    assert calls[0] == "jax.config.update('jax_default_matmul_precision', precision)"
    assert len(calls) == (2 if framework == "torch" else 1)


def test_the_starter_copy_keeps_the_matmul_precision(tmp_path):
    """A starter (a template with its plain bookkeeping) still honours --matmul-precision, by the
    template's own line, and names its device (PlainBook.start, where the script has not)."""
    write_starter("nnx", tmp_path / "copy")
    text = (tmp_path / "copy" / "ppo_nnx.py").read_text()
    assert precision_calls(text) == precision_calls((ROOT / "ppo_nnx.py").read_text())
    config = {"num_iterations": 1}
    PlainBook(0.0).start(config, str(tmp_path))
    assert config["device_name"] == jax.devices()[0].device_kind
    torch_config = {"num_iterations": 1, "device_name": "cuda:0"}
    PlainBook(0.0).start(torch_config, str(tmp_path))
    assert torch_config["device_name"] == "cuda:0"


# ------------------------------------------------------------------------------ compile times
def test_compile_times_are_summed_per_function_and_frozen_after_iteration_0():
    def rollout(x):
        return jnp.sin(x) * 3.0

    def update(x):
        return jnp.cos(x) - 1.0

    times = bookkeeping.CompileTimes()
    try:
        jax.jit(jax.vmap(rollout))(jnp.ones((2, 3)))
        jax.jit(update)(jnp.ones(5))
        jnp.ones(7) * 2.5  # small eager ops
        longer = jnp.ones(11)
        times.freeze()
        jax.jit(update)(longer)  # a new shape: compiled again
    finally:
        times.close()
    assert set(times.compile_s) == {"rollout", "update", "other"}
    assert all(seconds > 0 for seconds in times.compile_s.values())
    assert set(times.recompile_s) == {"update"}


def test_compiled_names_are_normalised():
    assert bookkeeping.compiled_name("jit(rollout)") == "rollout"
    assert bookkeeping.compiled_name("update") == "update"
    assert bookkeeping.compiled_name("jit(broadcast_in_dim)") == "other"
    # NNX's nnx.vmap names both functions "vmap_wrapper": the phase the first iteration is in
    assert bookkeeping.compiled_name("jit(vmap_wrapper)", "update") == "update"
    assert bookkeeping.compiled_name("jit(rollout)", "update") == "rollout"


FRAMEWORKS = [
    pytest.param(f, marks=() if i == 0 else pytest.mark.slow)
    for i, f in enumerate(STUDY.frameworks)
]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_run_records_its_device_precision_and_compile_times(framework, log_dir):
    script = STUDY.frameworks[framework].script
    # the fastest compile mode (torch.compile: ~1 min, and none of torch's modes is timed)
    args = [*TINY, "--matmul-precision", "highest", "--compile", FAST_COMPILE[framework]]
    proc = run_script(script, *args, log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = only_run_dir(log_dir)
    config = read_json(run_dir / "config.json")
    assert config["matmul_precision"] == "highest"
    assert config["matmul_precision_in_force"] == "highest"
    assert config["device_name"] and config["jaxlib"] and config["device_platform"] == "cpu"
    summary = read_json(run_dir / "summary.json")
    if framework == "torch":
        # torch's compile modes are not timed
        assert summary["compile_s"] is None and summary["recompile_s"] is None
        return
    assert summary["compile_s"]["rollout"] > 0 and summary["compile_s"]["update"] > 0
    # the same shapes every iteration: nothing compiles after iteration 0
    assert summary["recompile_s"] == {}, summary["recompile_s"]

"""A hostile or careless checkpoint, eval.json, config.json or Hub folder (issue 66, evaluate.py's
items): an env id that names a module, links planted where the tools write, a huge unknown tensor,
JSON nested too deep or of the wrong types, two checkpoints in one folder, a Hub folder that would
publish secrets or a whole virtual environment. Each is refused in one line (exit 2, nothing
written, nothing run) or handled without losing anything."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from checkpoints import PRIVATE, PUBLISHED_CONFIG, RUN_CONFIG, random_checkpoint

import atomic
import evaluate
from checkpoint import BadCheckpoint
from evaluation import eval_file, hub, model_file, video
from helpers import ROOT

# a module the working folder holds, which must never be imported: it leaves a marker file
EVIL = "open({marker!r}, 'w').write('ran')\n"


def run_evaluate_offline(*args: str, cwd: Path = ROOT, env: dict | None = None):
    """`python evaluate.py args` in a fresh process (one torch thread)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", **(env or {})}
    cmd = [sys.executable, str(ROOT / "evaluate.py"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def assert_refused(proc, *words: str) -> str:
    """One line on stderr, exit code 2; the line."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def rewrite_meta(path: Path, **changes) -> Path:
    """The checkpoint at path written again with its metadata changed (no checks)."""
    with safetensors.safe_open(str(path), "np") as f:
        tensors = {name: f.get_tensor(name) for name in f.keys()}
        header = f.metadata()
    header |= {
        key: value if isinstance(value, str) else json.dumps(value)
        for key, value in changes.items()
    }
    safetensors.numpy.save_file(tensors, str(path), metadata=header)
    return path


def paths_below(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


# ------------------------------------------------------------------------------- item 1: env ids
def test_unknown_env_takes_only_the_projects_ids():
    assert model_file.unknown_env("CartPole-v1", "gymnax") is None
    assert model_file.unknown_env("Craftax-Symbolic-v1", "gymnax") is None
    assert model_file.unknown_env("brax-ant", "gymnax") is None
    assert model_file.unknown_env("HalfCheetah-v4", "envpool") is None
    for env_id in ("evilmod:CartPole-v1", "this:CartPole-v1", "HalfCheetah-v4"):
        assert model_file.unknown_env(env_id, "gymnax")
    assert model_file.unknown_env("this:CartPole-v1", "envpool")
    # the video never hands gymnasium an id it does not know
    assert video.renderer("evilmod:CartPole-v1", "envpool") is None
    with pytest.raises(video.CannotRecord, match="not an envpool env here"):
        video.gymnasium_env("this:CartPole-v1")


@pytest.mark.parametrize("backend", ["gymnax", "envpool"])
def test_a_checkpoint_whose_env_names_a_module_is_refused_on_load(tmp_path, backend):
    path = random_checkpoint(tmp_path, "CartPole-v1")
    rewrite_meta(path, env="evilmod:CartPole-v1", env_backend=backend)
    with pytest.raises(BadCheckpoint, match="metadata env 'evilmod:CartPole-v1' is not"):
        model_file.load(path)


@pytest.mark.parametrize(
    "options",
    [[], ["--video", "v.gif"], ["--export-onnx", "a.onnx"], ["--hub-folder", "hub"]],
    ids=["plain", "video", "onnx", "hub"],
)
def test_evaluate_never_imports_the_module_an_env_id_names(tmp_path, options):
    """env "evilmod:CartPole-v1" on envpool, an evilmod.py in the working folder and PYTHONPATH
    with an empty entry (the working folder): refused in one line, exit 2, evilmod never imported,
    nothing written; whatever the options."""
    marker = tmp_path / "marker"
    (tmp_path / "evilmod.py").write_text(EVIL.format(marker=str(marker)))
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    rewrite_meta(path, env="evilmod:CartPole-v1", env_backend="envpool")
    before = paths_below(tmp_path)
    proc = run_evaluate_offline(
        str(path), "--episodes", "1", *options, cwd=tmp_path, env={"PYTHONPATH": ":/opt/x"}
    )
    assert_refused(proc, "evilmod:CartPole-v1")
    assert not marker.exists()
    assert paths_below(tmp_path) == before


# ------------------------------------------------------------------------------ item 2: no links
def hub_mark(folder: Path) -> None:
    """A Hub folder as an earlier --hub-folder left it (its mark)."""
    folder.mkdir(parents=True)
    atomic.write_json(folder / "config.json", {atomic.WRITTEN_BY: hub.HUB_TOOL})


def test_a_hub_folder_with_links_is_refused_before_anything_is_written(tmp_path):
    """README.md a link to victim/notes.md, evaluation/ a link to victim/evaluation/: evaluate.py
    --hub-folder refuses in one line (exit 2) before evaluating; the victim's files are as they
    were, and no eval.json is written beside the checkpoint."""
    victim = tmp_path / "victim"
    (victim / "evaluation").mkdir(parents=True)
    (victim / "notes.md").write_text("my notes")
    (victim / "evaluation" / "share.py").write_text("mine")
    folder = tmp_path / "hub"
    hub_mark(folder)
    (folder / "README.md").symlink_to(victim / "notes.md")
    (folder / "evaluation").symlink_to(victim / "evaluation")
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    proc = run_evaluate_offline(str(path), "--episodes", "1", "--hub-folder", str(folder))
    assert_refused(proc, "symbolic link", "--hub-folder")
    assert (victim / "notes.md").read_text() == "my notes"
    assert paths_below(victim) == ["evaluation", "evaluation/share.py", "notes.md"]
    assert (victim / "evaluation" / "share.py").read_text() == "mine"
    assert not (path.parent / "eval.json").exists()
    # each of them alone is refused too
    (folder / "README.md").unlink()
    with pytest.raises(atomic.LinkRefused, match="evaluation is a symbolic link"):
        hub.check_hub_folder(folder)


def test_a_hugging_face_cache_snapshot_is_not_written_through(tmp_path):
    """A snapshot whose files are links to blobs named by their hash: evaluate.py SNAPSHOT refuses
    to write eval.json through its link (one line, exit 2, before evaluating); the blob is
    intact."""
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    model = random_checkpoint(tmp_path / "run", "CartPole-v1")
    (blobs / "1111").write_bytes(model.read_bytes())
    record = {atomic.WRITTEN_BY: "evaluate.py", "evaluations": []}
    (blobs / "2222").write_text(json.dumps(record))
    (snapshot / "model.safetensors").symlink_to(blobs / "1111")
    (snapshot / "eval.json").symlink_to(blobs / "2222")
    proc = run_evaluate_offline(str(snapshot), "--episodes", "1")
    assert_refused(proc, "eval.json", "symbolic link")
    assert json.loads((blobs / "2222").read_text()) == record
    assert (snapshot / "eval.json").is_symlink()


# ------------------------------------------------------------------- item 8: the header read first
SPARSE_CHILD = """
import resource, sys
sys.path.insert(0, {root!r})
from checkpoint import BadCheckpoint
from evaluation import model_file
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    model_file.load({path!r})
    print("loaded")
except BadCheckpoint as e:
    print(str(e).splitlines()[0])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def with_unknown_tensor(path: Path, name: str, nbytes: int) -> None:
    """The checkpoint at path given one more F32 tensor, nbytes long, after the others' data: the
    file is extended sparsely (no disk, no memory)."""
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + length])
    body = data[8 + length :]
    header[name] = {
        "dtype": "F32",
        "shape": [nbytes // 4],
        "data_offsets": [len(body), len(body) + nbytes],
    }
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + body)
        f.truncate(8 + len(text) + len(body) + nbytes)


def test_a_huge_unknown_tensor_is_refused_without_reading_it(tmp_path):
    """A sparse 1 GiB unknown tensor: refused ("unknown tensors zz_junk") by the header alone; the
    child's peak memory grows by far less than the tensor (the old load read it: 2.1 GB)."""
    path = random_checkpoint(tmp_path, "CartPole-v1")
    with_unknown_tensor(path, "zz_junk", 2**30)
    child = SPARSE_CHILD.format(root=str(ROOT), path=str(path))
    proc = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    message, grown_kib = proc.stdout.strip().splitlines()
    assert "unknown tensors zz_junk" in message
    assert int(grown_kib) < 100 * 1024  # KiB: under 100 MiB, against 1024 MiB of tensor


def test_a_tensor_outside_the_file_is_refused(tmp_path):
    path = random_checkpoint(tmp_path, "CartPole-v1")
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + length])
    header["actor.0.bias"]["data_offsets"][1] += 10**9
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + length :])
    with pytest.raises(BadCheckpoint, match="not a readable safetensors file"):
        model_file.load(path)


# ---------------------------------------------------------------------- item 12: hostile JSON
def test_metadata_nested_too_deep_is_one_short_line(tmp_path):
    """metadata command "[" x 100000 (a RecursionError before): one line, cut short."""
    path = rewrite_meta(random_checkpoint(tmp_path, "CartPole-v1"), command="[" * 100_000)
    with pytest.raises(BadCheckpoint, match="metadata command must be a JSON list of strings") as e:
        model_file.load(path)
    assert "\n" not in str(e.value) and len(str(e.value)) < 500


def test_an_eval_json_of_bad_entries_is_refused_before_the_evaluation(tmp_path):
    """A marked eval.json whose evaluations are [1, "x"] (an AttributeError after the evaluation
    before): refused in one line, exit 2, left as it is."""
    path = random_checkpoint(tmp_path, "CartPole-v1")
    bad = json.dumps({atomic.WRITTEN_BY: "evaluate.py", "evaluations": [1, "x"]})
    (tmp_path / "eval.json").write_text(bad)
    with pytest.raises(ValueError, match="evaluation 0 is an integer, not an object"):
        eval_file.check(tmp_path / "eval.json")
    proc = run_evaluate_offline(str(path), "--episodes", "1")
    assert_refused(proc, "eval.json", "evaluation 0")
    assert (tmp_path / "eval.json").read_text() == bad
    deep = json.dumps({atomic.WRITTEN_BY: "evaluate.py", "evaluations": [[[[]]] * 1]})
    deep = deep.replace("[[[[]]]]", "[" * 5000 + "]" * 5000)
    (tmp_path / "eval.json").write_text(deep)
    with pytest.raises(ValueError, match="not JSON"):
        eval_file.check(tmp_path / "eval.json")


# -------------------------------------------------------------------- item 10: nothing dropped
def test_two_checkpoints_in_one_folder_keep_their_entries(tmp_path):
    """Two checkpoints of one folder, evaluated with the same framework, mode, episodes and seed:
    eval.json holds an entry for each, each naming its file and sha256."""
    first = random_checkpoint(tmp_path, "CartPole-v1", seed=0)
    second = first.with_name("other.safetensors")
    second.write_bytes(random_checkpoint(tmp_path / "b", "CartPole-v1", seed=1).read_bytes())
    results = [evaluate.main([str(path), "--episodes", "1"]) for path in (first, second, first)]
    entries = json.loads((tmp_path / "eval.json").read_text())["evaluations"]
    named = [(e["checkpoint"]["file"], e["checkpoint"]["sha256"]) for e in entries]
    # the first checkpoint's evaluation run again replaced its own entry (now last), nothing else
    assert named == [
        ("other.safetensors", model_file.sha256_of(second)),
        ("model.safetensors", model_file.sha256_of(first)),
    ]
    assert entries == results[1:]


def test_a_hub_folder_keeps_its_earlier_evaluations(tmp_path):
    """--hub-folder onto a folder it wrote: the torch evaluation there stays beside the new linen
    one."""
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    ckpt = model_file.load(path)
    setups = {f: evaluate.prepare(ckpt, f, 1, 1, False) for f in ("torch", "linen")}
    results = {f: evaluate.evaluate(setup, 1).result for f, setup in setups.items()}
    folder = tmp_path / "hub"
    hub.write_hub_folder(folder, path, ckpt, results["torch"], None)
    hub.write_hub_folder(folder, path, ckpt, results["linen"], None)
    entries = json.loads((folder / "eval.json").read_text())["evaluations"]
    assert [e["framework"] for e in entries] == ["torch", "linen"]


# ------------------------------------------------------- items 5, 6, 11: what the Hub folder holds
def test_the_hub_folder_publishes_a_fixed_list_and_no_secrets(tmp_path, capsys):
    """The folder holds exactly the fixed list of files (not whatever modules are loaded: a venv/
    inside the project was copied whole); its config.json the run's known fields only (no token, no
    host, no path), the command by the script's base name."""
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    atomic.write_json(path.parent / "config.json", RUN_CONFIG | PRIVATE)
    rewrite_meta(
        path,
        command=[
            "/home/someone/benchback-rl/ppo_linen.py",
            "--log-dir",
            "/home/someone/x",
            "--seed",
            "1",
        ],
    )
    ckpt = model_file.load(path)
    result = evaluate.evaluate(evaluate.prepare(ckpt, "linen", 1, 1, False), 1).result
    folder = tmp_path / "hub"
    hub.write_hub_folder(folder, path, ckpt, result, None)
    files = [p for p in paths_below(folder) if (folder / p).is_file()]
    assert files == sorted(
        [
            "README.md",
            "config.json",
            "eval.json",
            "model.safetensors",
            "requirements.txt",
            *hub.CODE,
        ]
    )
    text = (folder / "config.json").read_text()
    for secret in ("hf_secret", "someones-laptop", "/home/someone", "Linux-6.1"):
        assert secret not in text and secret not in (folder / "README.md").read_text()
    config = json.loads(text)
    assert config["training_config"] == PUBLISHED_CONFIG
    assert config["command"] == ["ppo_linen.py", "--seed", "1"]
    assert "python ppo_linen.py --seed 1" in (folder / "README.md").read_text()


def test_a_config_of_another_run_is_not_published(tmp_path):
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    atomic.write_json(path.parent / "config.json", RUN_CONFIG | {"seed": 7})
    assert hub.training_config(path, model_file.load(path).meta) is None


def test_the_code_list_holds_every_project_module_evaluate_loads():
    """hub.CODE covers what evaluate.py imports to run in each framework and to export ONNX and
    record a video: a copy of the folder needs nothing else of the project."""
    child = (
        "import sys, importlib\n"
        "import evaluate\n"
        "from evaluation import share, video, hub, eval_file\n"
        "import env_adapters, env_normalize\n"
        "for f in ('linen', 'nnx', 'equinox', 'torch'): importlib.import_module('ppo_' + f)\n"
        "files = [getattr(m, '__file__', None) for m in list(sys.modules.values())]\n"
        "print('\\n'.join(f for f in files if f))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = set()
    for line in proc.stdout.splitlines():
        file = Path(line)
        # a module whose __file__ is relative (torch's _ops, _classes) is no file of the project
        if (
            file.is_absolute()
            and file.is_relative_to(ROOT)
            and not file.relative_to(ROOT).parts[0].startswith(".")
        ):
            loaded.add(file.relative_to(ROOT).as_posix())
    assert loaded and loaded <= set(hub.CODE), loaded - set(hub.CODE)


def test_a_hub_folder_whose_readme_is_a_folder_is_refused_first(tmp_path):
    """README.md a folder (an IsADirectoryError after most files were written, before): refused,
    nothing written."""
    folder = tmp_path / "hub"
    hub_mark(folder)
    (folder / "README.md").mkdir()
    before = paths_below(folder)
    with pytest.raises(atomic.OutputRefused, match="README.md that is not a regular file"):
        hub.check_hub_folder(folder)
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    ckpt = model_file.load(path)
    with pytest.raises(atomic.OutputRefused):
        hub.write_hub_folder(folder, path, ckpt, {}, None)
    assert paths_below(folder) == before


def test_a_deep_config_beside_the_checkpoint_is_not_published(tmp_path, capsys):
    """A config.json nested 10000 deep (a RecursionError after eval.json, before): the folder is
    written without it, and a line says why."""
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    (path.parent / "config.json").write_text("[" * 10_000 + "]" * 10_000)
    ckpt = model_file.load(path)
    result = evaluate.evaluate(evaluate.prepare(ckpt, "linen", 1, 1, False), 1).result
    hub.write_hub_folder(tmp_path / "hub", path, ckpt, result, None)
    assert json.loads((tmp_path / "hub" / "config.json").read_text())["training_config"] is None
    assert "nested deeper than" in capsys.readouterr().err
    assert np.isfinite(result["mean_return"])

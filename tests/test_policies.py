"""benchmarks/policies.py (issue 55 item 9): the table of a policy per framework evaluated in each
framework, built from given evaluation results (no training, no evaluation), and its refusals,
before anything is evaluated or written. The checkpoints are checkpoints.py's random ones
(checkpoint.save, no training)."""

from pathlib import Path

import pytest
from checkpoints import random_checkpoint

import atomic
from benchmarks import policies

FRAMEWORK_NAMES = ("Flax Linen", "Flax NNX", "Equinox", "PyTorch")


def result(trained_by: str, framework: str, returns: list[float]) -> dict:
    """An eval.json entry as evaluate.evaluate makes it (the fields the table reads)."""
    mean = sum(returns) / len(returns)
    std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
    return {
        "trained_by": trained_by,
        "framework": framework,
        "mean_return": mean,
        "std_return": std,
        "returns": returns,
    }


def table_rows(table: str) -> list[list[str]]:
    """A markdown table's cells, header row first (the separator row dropped)."""
    lines = [line for line in table.splitlines() if not set(line) <= set("|-: ")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def test_returns_table_rows_are_trained_by_columns_evaluated_in():
    """A row per framework that trained a policy (in the frameworks' order, whatever the results'
    order), a column per framework that ran it, each cell its mean ± std; an evaluation missing
    shows as –."""
    results = [
        result("torch", framework, [100.0 + i, 110.0 + i])
        for i, framework in enumerate(("linen", "nnx", "equinox"))
    ] + [result("linen", framework, [1500.0, 1400.0]) for framework in policies.FRAMEWORKS]
    header, linen, torch = table_rows(policies.returns_table(results))
    assert header[1:] == list(FRAMEWORK_NAMES)
    assert linen == ["Flax Linen"] + ["1450.0 ± 50.0"] * 4
    assert torch == ["PyTorch", "105.0 ± 5.0", "106.0 ± 5.0", "107.0 ± 5.0", policies.NO_RESULT]


def test_reading_says_where_the_frameworks_agree():
    """The frameworks that give every policy the same returns, episode by episode, how far the
    others' means are from theirs, and the range of the policies' own returns."""
    same = [result("linen", f, [10.0, 20.0]) for f in policies.FRAMEWORKS]
    assert policies.reading(same).startswith(
        "Flax Linen, Flax NNX, Equinox and PyTorch give each policy the same returns, episode by "
        "episode;"
    )
    moved = same[:3] + [result("linen", "torch", [10.0, 20.5])]
    moved += [result("nnx", f, [30.0, 30.0]) for f in policies.FRAMEWORKS]
    assert policies.reading(moved) == (
        "Flax Linen, Flax NNX and Equinox give each policy the same returns, episode by episode; "
        "PyTorch "
        "differs from them by at most 0.25 in the mean; in their own frameworks the policies "
        "return from 15.0 "
        "(Flax Linen) to 30.0 (Flax NNX)."
    )
    apart = [result("linen", f, [10.0, 20.0 + i]) for i, f in enumerate(policies.FRAMEWORKS)]
    assert policies.reading(apart).startswith(
        "No two frameworks give a policy the same returns; their means differ by at most 1.5;"
    )


def test_readme_names_sizes_machine_and_commands(tmp_path):
    out = tmp_path / "edition"
    record = {
        "env": "CartPole-v1@gymnax",
        "episodes": 10,
        "seed": 1,
        "runs_dir": "runs",
        "date": "2026-12-04",
        "machine": {
            "cores": 2,
            "cpu_model": "AMD EPYC",
            "virtual_machine": True,
            "memory_gib": 24.0,
            "os": "Linux",
            "python": "3.11.7",
            "hostname": "vm",
        },
        "versions": {"python": "3.11.7", "jax": "0.10.2", "torch": "2.13.0+cpu"},
        "policies": [
            {
                "framework": "linen",
                "run": "exp9/CartPole-v1__linen__1",
                "iteration": 488,
                "final_return": 1836.3841796875,
                "checkpoint_bytes": 43210,
                "training_command": ["ppo_linen.py", "--env", "CartPole-v1", "--save-model"],
                "video": str(out / "videos" / "linen.mp4"),
            }
        ],
        "evaluations": [result("linen", f, [500.0, 500.0]) for f in policies.FRAMEWORKS],
        "extras_commands": [
            ["evaluate.py", "runs/x", "--video", str(out / "videos" / "linen.mp4")]
        ],
        "hub_framework": "linen",
        "hub_folder": str(out / "hub-linen"),
    }
    text = " ".join(policies.readme_text(record, out).split())  # the tables' padding aside
    assert "| Flax Linen | 500.0 ± 0.0 | 500.0 ± 0.0 | 500.0 ± 0.0 | 500.0 ± 0.0 |" in text
    assert "| 1836 | 43,210 |" in text and "python 3.11.7" not in text  # Python once, the machine's
    assert "43,210" in text and "[linen.mp4](videos/linen.mp4)" in text
    assert "2 cores (AMD EPYC, a VM; 24 GiB)" in text and "jax 0.10.2, torch 2.13.0+cpu" in text
    assert "python ppo_linen.py --env CartPole-v1 --save-model" in text
    assert "[hub-linen/](hub-linen/README.md)" in text


# ----------------------------------------------------------------------------------------- refusals
def listing(*folders: Path) -> dict:
    return {
        f: sorted(p.relative_to(f) for p in f.rglob("*")) if f.exists() else None for f in folders
    }


def assert_refused(capsys, argv: list[str], words: list[str], *folders: Path) -> None:
    """main(argv) exits 2 with one line naming words, and leaves folders as they were."""
    before = listing(*folders)
    with pytest.raises(SystemExit) as exit_info:
        policies.main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert len(err.strip().splitlines()) == 1 and all(w in err for w in words), err
    assert listing(*folders) == before


@pytest.fixture
def runs(tmp_path) -> Path:
    random_checkpoint(tmp_path / "runs" / "exp9" / "cartpole-linen", "CartPole-v1")
    return tmp_path / "runs"


FOREIGN = {
    "README.md": lambda out: (out / "README.md").write_text("# my notes\n"),
    "policies.json": lambda out: (out / "policies.json").write_text('{"mine": 1}'),
    "linen.mp4": lambda out: (out / "videos" / "linen.mp4").write_bytes(b"my film"),
    "hub-linen": lambda out: (out / "hub-linen" / "notes.txt").write_text("mine"),
}


@pytest.mark.parametrize("name", FOREIGN)
def test_an_output_it_did_not_write_is_refused(capsys, tmp_path, runs, name):
    out = tmp_path / "edition"
    (out / "videos").mkdir(parents=True)
    (out / "hub-linen").mkdir()
    FOREIGN[name](out)
    assert_refused(capsys, [str(runs), "--out", str(out)], [name], out, runs)


def test_an_eval_json_it_did_not_write_is_refused(capsys, tmp_path, runs):
    (runs / "exp9" / "cartpole-linen" / "eval.json").write_text('{"mine": 1}')
    out = tmp_path / "edition"
    assert_refused(capsys, [str(runs), "--out", str(out)], ["eval.json"], runs, out)


def test_runs_it_cannot_tabulate_are_refused(capsys, tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "edition"
    runs.mkdir()
    assert_refused(
        capsys, [str(runs), "--out", str(out)], ["holds no model.safetensors"], runs, out
    )
    random_checkpoint(runs / "a", "CartPole-v1")
    random_checkpoint(runs / "b", "CartPole-v1", seed=1)
    assert_refused(capsys, [str(runs), "--out", str(out)], ["two linen policies"], runs, out)
    random_checkpoint(runs / "b", "Pendulum-v1")
    words = ["several envs", "CartPole-v1@gymnax", "Pendulum-v1@gymnax"]
    assert_refused(capsys, [str(runs), "--out", str(out)], words, runs, out)


LINKS = {
    "videos": lambda out, elsewhere: (out / "videos").symlink_to(elsewhere),
    "hub-linen": lambda out, elsewhere: (out / "hub-linen").symlink_to(elsewhere),
    "README.md": lambda out, elsewhere: (out / "README.md").symlink_to(elsewhere / "notes.md"),
}


@pytest.mark.parametrize("name", LINKS)
def test_a_link_below_the_out_folder_is_refused(capsys, tmp_path, runs, name):
    """A link planted in DIR where an output goes (the videos' folder, the Hub folder, README.md):
    refused in one line before anything runs; what it leads to is left as it was (issue 66)."""
    out, elsewhere = tmp_path / "edition", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "notes.md").write_text(f"{atomic.md_mark(policies.TOOL)}\nmy notes\n")
    LINKS[name](out, elsewhere)
    words = [name, "symbolic link"]
    assert_refused(capsys, [str(runs), "--out", str(out)], words, out, runs, elsewhere)

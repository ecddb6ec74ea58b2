"""analysis.learning_curves: one panel per env, a line per completed run with an episodic return."""

import json

import pytest
from analysis_runs import tie_events
from tensorboardX import SummaryWriter

from analysis import learning_curves
from helpers import STUDY


def write_returns_run(
    root, env: str, framework: str, returns: list[float], status: str = "completed"
):
    """A run folder as the scripts write it: config.json, summary.json and one events file."""
    run_dir = root / f"{env}__{framework}__small__jit__1__0"
    run_dir.mkdir(parents=True)
    mode = STUDY.default_compile(framework)
    config = dict(
        env=env, framework=framework, model_size="small", compile=mode, seed=1, sync_timing=False
    )
    config.update(batch_size=100, num_iterations=len(returns))
    config.update(hostname="host", start_time="2025-01-01T00:00:00+00:00")
    (run_dir / "config.json").write_text(json.dumps(config))
    final = sum(returns[-10:]) / len(returns[-10:])  # as bookkeeping.py makes it
    summary = dict(
        status=status, total_s=1.0, iterations_completed=len(returns), final_return=final
    )
    (run_dir / "summary.json").write_text(json.dumps(summary))
    # the start time's: the events are written within the run (runlog ties them to it)
    wall = 1735689600.0
    with SummaryWriter(str(run_dir)) as writer:
        for i, value in enumerate(returns):
            writer.add_scalar("time/iteration", 0.1, (i + 1) * 100, walltime=wall + 0.1 * (i + 1))
            writer.add_scalar(
                learning_curves.RETURN, value, (i + 1) * 100, walltime=wall + 0.1 * (i + 1)
            )
    tie_events(run_dir, config)
    return run_dir


def test_each_completed_run_is_a_curve_of_its_env(tmp_path):
    write_returns_run(tmp_path / "runs", "Pendulum-v1", "linen", [-1200.0, -800.0, -300.0])
    write_returns_run(tmp_path / "runs", "Pendulum-v1", "torch", [-1100.0, -700.0])
    write_returns_run(tmp_path / "runs", "Swimmer-misc", "linen", [50.0, 300.0])
    write_returns_run(
        tmp_path / "runs", "Reacher-misc", "nnx", [10.0], status="interrupted"
    )  # left out
    by_env = learning_curves.curves(learning_curves.completed_runs([str(tmp_path / "runs")]))
    assert sorted(by_env) == ["Pendulum-v1", "Swimmer-misc"]
    frameworks = sorted(curve[0] for curve in by_env["Pendulum-v1"])
    assert frameworks == ["linen", "torch"]
    linen = next(curve for curve in by_env["Pendulum-v1"] if curve[0] == "linen")
    assert list(linen[2]) == [100, 200, 300] and list(linen[3]) == [-1200.0, -800.0, -300.0]


def test_the_figure_is_written_and_never_replaced_without_force(tmp_path, capsys):
    write_returns_run(tmp_path / "runs", "Pendulum-v1", "linen", [-1200.0, -300.0])
    out = tmp_path / "fig.png"
    learning_curves.main([str(tmp_path / "runs"), "--out", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| Pendulum-v1 | linen | 1 | 200 | -750.0 |" in out.with_suffix(".md").read_text()
    before = out.read_bytes()
    with pytest.raises(SystemExit) as refusal:
        learning_curves.main([str(tmp_path / "runs"), "--out", str(out)])
    assert refusal.value.code == 2 and out.read_bytes() == before
    assert "--force" in capsys.readouterr().err
    learning_curves.main([str(tmp_path / "runs"), "--out", str(out), "--force"])


def test_no_completed_run_writes_nothing(tmp_path):
    write_returns_run(tmp_path / "runs", "Pendulum-v1", "linen", [-1200.0], status="failed")
    with pytest.raises(SystemExit) as refusal:
        learning_curves.main([str(tmp_path / "runs"), "--out", str(tmp_path / "fig.png")])
    assert refusal.value.code == 2 and not (tmp_path / "fig.png").exists()


def test_a_file_of_someone_else_at_out_or_beside_it_is_never_replaced(tmp_path, capsys):
    """--out mine.png --force replaced any file there, and the .md beside it was replaced without a
    word (issue 79 item 7). Now a figure is this tool's by its PNG text chunk (one of before the
    mark by the table beside it), the .md by its first line: a user's file at either is refused in
    one line, --force or not, and left as it is; the tool's own are replaced."""
    write_returns_run(tmp_path / "runs", "Pendulum-v1", "linen", [-1200.0, -300.0])
    out = tmp_path / "fig.png"
    args = [str(tmp_path / "runs"), "--out", str(out), "--force"]
    for mine, content in [(out, b"\x89PNG\r\n\x1a\nmy own figure"), (out.with_suffix(".md"), b"#")]:
        mine.write_bytes(content)
        with pytest.raises(SystemExit) as refusal:
            learning_curves.main(args)
        assert refusal.value.code == 2 and mine.read_bytes() == content
        err = capsys.readouterr().err
        assert f"{mine} was not written by analysis.learning_curves" in err and err.count("\n") == 1
        mine.unlink()
    learning_curves.main(args)
    learning_curves.main(args)  # its own, replaced
    table = out.with_suffix(".md").read_text()
    assert table.splitlines()[1] == learning_curves.TABLE_HEADER
    # a figure of before the mark, known by the table of before the mark beside it
    out.write_bytes(b"\x89PNG\r\n\x1a\nunmarked")
    out.with_suffix(".md").write_text(table.split("\n", 1)[1])
    learning_curves.main(args)
    assert out.read_bytes() != b"\x89PNG\r\n\x1a\nunmarked"

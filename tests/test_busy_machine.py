"""benchmarks/busy_machine.py's arithmetic: the cores it pins to, and the growth it reports against
Linen's."""

import pytest

from benchmarks import busy_machine


def test_core_set_reads_taskset_lists():
    assert busy_machine.core_set("0-1") == {0, 1}
    assert busy_machine.core_set("0,2-3") == {0, 2, 3}
    assert busy_machine.core_set("5") == {5}


def test_bad_cpus_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        busy_machine.parse_args(["--cpus", "a-b"])
    assert stop.value.code == 2
    assert "--cpus must be a core list" in capsys.readouterr().err


def run(wall, cpu, steady):
    return {"wall_s": wall, "cpu_s": cpu, "steady_s": steady}


def test_table_divides_each_growth_by_linens():
    results = {
        "linen jit": {"alone": [run(10, 9, 1.0)] * 3, "busy": [run(20, 9, 2.0)] * 3},
        "torch compile": {
            "alone": [run(30, 50, 1.0), run(40, 50, 1.0), run(30, 50, 1.0)],
            "busy": [run(120, 90, 4.0), run(90, 90, 4.0), run(90, 90, 3.0)],
        },
    }
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")
        for line in busy_machine.table(results, "title").splitlines()
        if line.startswith("| linen") or line.startswith("| torch")
    }
    # torch: wall 30 -> 90 (3.00x), Linen 10 -> 20 (2.00x): torch degrades 1.50x as much
    assert rows["torch compile"][-3:] == ["3.00x", "4.00x", "1.50x |"]
    assert rows["linen jit"][-3:] == ["2.00x", "2.00x", " |"]

"""benchmarks/agent_events.py: its three ways of writing N agents' scalars write the same values,
read back as a run's are (tbparse), so that its table compares the cost of one content."""

from benchmarks import agent_events
from core.events import read_scalars


def test_the_three_ways_write_the_same_scalars(tmp_path):
    # 3 agents, 2 timed iterations after 1 left out: steps 0, 1 and 2 written by every way
    rows = agent_events.measure(3, 2, 1, str(tmp_path))
    assert [row["way"] for row in rows] == list(agent_events.WAYS)
    assert rows[0]["calls_ratio"] == 1.0 and all(row["calls_ms"] > 0 for row in rows)
    one = read_scalars(tmp_path / "way2")
    assert one["step"].tolist() == [0, 1, 2]
    for way in ("way0", "way1"):
        for k in range(3):
            own = read_scalars(tmp_path / way / f"agent_{k}")
            assert own["step"].tolist() == [0, 1, 2]
            for tag in agent_events.TAGS:
                assert own[tag].tolist() == one[f"agent_{k}/{tag}"].tolist(), (way, k, tag)

"""The suite's guard on its quick set: a test not marked slow that took over UNMARKED_LIMIT_S in
the suite's own report (its setup, call and teardown, as pytest timed them) fails the run, named in
the summary, until it is marked slow or made cheaper; `-m "not slow"` stays a check of minutes.
The seconds a test spent in trained_run (tests/trained_runs.py: a run trained once for the suite, by
whichever test asks first, or waited for) are the suite's, not the test's, and are left out.
conftest.py runs these hooks."""

import sys

import pytest

# Unmarked tests stay well under it: a tiny run's process takes ~5-15 s on 2 cores, and a test that
# starts more than one is marked slow.
UNMARKED_LIMIT_S = 30.0
shared_s_counted = 0.0
own_s: dict[str, float] = {}
too_slow: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report carries the seconds it spent in trained_run (in the process that ran it:
    an xdist worker sends its reports, these with them, to the main process)."""
    global shared_s_counted
    report = (yield).get_result()
    module = sys.modules.get("trained_runs")
    spent = module.seconds_spent() if module else 0.0
    report.user_properties.append(("shared_runs_s", spent - shared_s_counted))
    shared_s_counted = spent


def pytest_runtest_logreport(report) -> None:
    if "slow" in report.keywords:
        return
    shared = sum(value for name, value in report.user_properties if name == "shared_runs_s")
    own_s[report.nodeid] = own_s.get(report.nodeid, 0.0) + report.duration - shared


def pytest_sessionfinish(session, exitstatus) -> None:
    # an xdist worker's reports are the main process' to judge
    if hasattr(session.config, "workerinput"):
        return
    too_slow.extend(
        f"{seconds:.1f} s {nodeid}"
        for nodeid, seconds in sorted(own_s.items(), key=lambda kv: -kv[1])
        if seconds > UNMARKED_LIMIT_S
    )
    if too_slow and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    if too_slow:
        terminalreporter.section(f"tests not marked slow that took over {UNMARKED_LIMIT_S:g} s")
        terminalreporter.write_line("mark each @pytest.mark.slow or make it cheaper:")
        for line in too_slow:
            terminalreporter.write_line(line)

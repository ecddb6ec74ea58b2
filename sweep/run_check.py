"""The run arguments given after bench.sh's --, checked before the first run by the scripts' own
parser: core.run_checks.check_args on each script's Args (tyro, then Args' own checks), as every run
checks its input. A misspelt one (-- --dtyp bfloat16) is then one line and exit 2 before anything is
made, not a failure of every run after its imports.

The arguments the sweep builds itself, and those of the study (a preset's args, a learning
experiment's configuration; tests/test_sweep_inputs.py checks them), are right by construction: a
sweep is checked when it is given arguments after --, on one command per framework and configuration
(each with the preset's args, the configuration's and those after --). The scripts are imported in
one child of the runs' Python, which takes seconds (JAX, the frameworks, gymnax: about 9 s of CPU
for the four on 2 cores); a sweep without arguments after -- checks nothing. The child sees no
accelerator (JAX_PLATFORMS=cpu): parsing needs none, and a run checks its batch against its own
device's memory.

    # the child: prints its verdict as JSON
    python sweep/run_check.py '{"SCRIPT": [ARGV, ...], ...}'
"""

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from atomic import BadJson, parse_json
from core import study
from core.option_checks import PROG, BadOption
from sweep.matrix import PlannedRun


def argvs_to_check(runs: list[PlannedRun], the_study: study.Study) -> dict[str, list[list[str]]]:
    """script -> the argument lists to check: of each framework, the first run of each
    configuration."""
    chosen: dict[tuple, PlannedRun] = {}
    for run in runs:
        config_args = the_study.experiments[run.experiment].env_args(run.env)
        chosen.setdefault((run.framework, config_args), run)
    argvs: dict[str, list[list[str]]] = {}
    for run in chosen.values():
        argvs.setdefault(run.command[1], []).append(list(run.command[2:]))
    return argvs


def check_run_args(
    runs: list[PlannedRun], given: tuple[str, ...], the_study: study.Study, python: str
) -> None:
    """With arguments given after -- (`given`): BadOption naming the first one a script's parser
    refuses in a run of these. A script that cannot be imported (its framework not installed) is a
    warning: its runs will say why."""
    if not given:
        return
    cmd = [python, "-m", "sweep.run_check", json.dumps(argvs_to_check(runs, the_study))]
    # the sweep package importable from any folder
    path = os.pathsep.join(filter(None, [str(study.ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": path}
    try:
        child = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as e:
        raise BadOption(f"--python {python!r} cannot be run ({e.strerror or e})") from None
    try:
        verdict = parse_json(child.stdout.strip().splitlines()[-1], "the scripts' check")
    except (IndexError, BadJson):
        last = (child.stderr.strip() or "no output").splitlines()[-1]
        verdict = {"refused": None, "unchecked": [["the scripts", last]]}
    if verdict["refused"]:
        name, message = verdict["refused"]
        raise BadOption(
            f"{name} refuses the run arguments after -- ({shlex.join(given)}): {message}"
        )
    for name, reason in verdict["unchecked"]:
        print(
            f"{PROG}: warning: the run arguments of {name} were not checked ({reason}); its runs "
            "will say",
            file=sys.stderr,
        )


def load_script(script: str):
    """The script as a module (not __main__: its main() does not run)."""
    spec = importlib.util.spec_from_file_location(Path(script).stem, script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where tyro finds Args' annotations
    spec.loader.exec_module(module)
    return module


def first_line(error: Exception) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


def verdict(argvs: dict[str, list[list[str]]]) -> dict:
    """{"refused": [script name, message] of the first argv refused, or None; "unchecked": [script
    name, why] of each script that could not be imported}."""
    from core.run_checks import check_args

    unchecked = []
    for script, script_argvs in argvs.items():
        name = Path(script).name
        try:
            args_type = load_script(script).Args
        # an import that fails (a framework not installed): its runs will say why
        except Exception as e:
            unchecked.append([name, f"{type(e).__name__}: {first_line(e)}"])
            continue
        for argv in script_argvs:
            try:
                check_args(args_type, argv)
            except ValueError as e:
                return {"refused": [name, first_line(e)], "unchecked": unchecked}
            except SystemExit:  # --help: printed, as the runs would
                pass
    return {"refused": None, "unchecked": unchecked}


if __name__ == "__main__":
    print(json.dumps(verdict(parse_json(sys.argv[1], "the run's words"))))

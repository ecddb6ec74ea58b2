"""A ppo_*.py script's bookkeeping when the benchmark's is not beside it (a starter's copy): the
command line read before the script's heavy imports (--help; bad input in one line, exit code 2,
before any folder is made), the run folder and its name, a progress line per iteration, the stop
signals (SIGINT, SIGTERM, SIGHUP: atomic.py's policy) answered at the next iteration boundary with
TensorBoard's events flushed on the way out (exit code 130), and a last line that says where the
logs went. The benchmark's bookkeeping adds config.json and summary.json to it.

A script makes one at its first lines and calls it at a few named points:

    book = PlainBook(START, Args)  # --help, bad input: answered before the heavy imports
    ... in main():
    run_dir = book.make_run_dir(os.path.join(args.log_dir, book.run_name(args, FRAMEWORK)))
    book.start(config, run_dir)
    book.setup_done(before_s)
    book.check_signals()  # between phases: a stop signal stops the run there
    book.iteration_done(iteration, returns, writer, scalars)  # and the progress line
    ... at its end:
    book.run(main, Args)
"""

import io
import os
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import fields
from typing import Callable, Optional

import atomic


def tyro_message(box: str) -> str:
    """The message of tyro's error box (a title, a rule, the message wrapped over lines, a rule,
    help), on one line."""
    lines = [line.strip() for line in box.splitlines()]
    rules = [i for i, line in enumerate(lines) if line.startswith("---")]
    if len(rules) < 2:
        return "bad arguments (see --help)"
    return " ".join(" ".join(lines[rules[0] + 1 : rules[1]]).split())


def tyro_parse(args_type, argv: list[str]):
    """args_type parsed from argv by tyro; bad input raises ValueError with tyro's message on one
    line; --help prints the help and raises SystemExit(0)."""
    import tyro

    messages = io.StringIO()
    try:
        with redirect_stderr(messages), redirect_stdout(messages):
            args = tyro.cli(args_type, args=argv)
    except SystemExit as e:
        if e.code == 0:  # --help
            print(messages.getvalue(), end="")
            raise
        message = tyro_message(messages.getvalue())
        # an Args check (__post_init__) names its flag itself
        raise ValueError(message.removeprefix(f"Error parsing {args_type.__name__}: ")) from None
    return args


def refuse(error: Exception) -> None:
    """Bad input: one line, exit code 2."""
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)


def progress(num_iterations: int, iteration: int, scalars: dict, iteration_times: list) -> str:
    """The progress line; the ETA from this process's iterations after its first (compile)."""
    done = f"iter {iteration + 1}/{num_iterations} | SPS {scalars['charts/SPS']:,.0f}"
    episodes = "no episode ended"
    if "charts/episodic_return" in scalars:
        episodes = f"return {scalars['charts/episodic_return']:.1f}"
    timing = f"rollout {scalars['time/rollout']:.3f}s update {scalars['time/update']:.3f}s"
    remaining = num_iterations - iteration - 1
    after_compile = iteration_times[1:]
    mean = sum(after_compile) / max(1, len(after_compile))
    eta = f"ETA {mean * remaining:.0f}s" if len(after_compile) >= 2 else "ETA -"
    return f"{done} | {episodes} | {timing} | elapsed {scalars['time/elapsed']:.1f}s {eta}"


def with_run_flags(args_type, argv: list[str]) -> list[str]:
    """argv with, after --resume RUN_DIR, the stopped run's flags for those argv leaves out
    (resuming.resumed_argv, imported only then), once the run is known to be of the script's
    framework (its FRAMEWORK)."""
    if not any(token.partition("=")[0] == "--resume" for token in argv):
        return argv
    from core import resuming

    framework = getattr(sys.modules.get(args_type.__module__), "FRAMEWORK", None)
    return resuming.resumed_argv([field.name for field in fields(args_type)], argv, framework)


class PlainBook:
    def __init__(self, start: float, args_type=None, framework: Optional[str] = None):
        """start: time.perf_counter() at the script's first line; args_type: the script's Args,
        whose command line is read now (the stop signals held until run() installs their policy);
        framework: the benchmark's bookkeeping's (the packages it records), unused here."""
        self.start_time = start
        self.run_dir = None  # made by make_run_dir: from then on, bad input is a failure
        self.num_iterations = None
        self.iterations_completed = 0
        self.iteration_times = []  # this process's: the progress line's ETA
        self.interrupts = atomic.Interrupts("the next iteration boundary")
        if args_type is not None:
            atomic.hold_stop_signals()
            try:
                tyro_parse(args_type, sys.argv[1:])
            except ValueError as e:
                refuse(e)

    def check_signals(self):
        self.interrupts.check()

    def run_name(self, args, framework: str) -> str:
        """The run's name: its folder's under --log-dir, {env}__{framework}__{model_size}__{compile}
        __{seed}__{unix time}, with --exp-name after the env as CleanRL puts it when it is not the
        default (the script's name), so that the default names stay as they were, and {N}agents
        after the seed for N > 1 agents; with --resume, the name of the folder that the run
        continues in."""
        if args.resume:
            return os.path.basename(os.path.normpath(args.resume))
        default = {field.name: field.default for field in fields(type(args))}.get("exp_name")
        exp_name = f"__{args.exp_name}" if args.exp_name != default else ""
        agents = [f"{args.num_agents}agents"] if args.num_agents > 1 else []
        parts = (args.model_size, args.compile, args.seed, *agents, int(time.time()))
        return f"{args.env}{exp_name}__{framework}__" + "__".join(map(str, parts))

    def make_run_dir(self, run_dir: str, resume: Optional[str] = None) -> str:
        """Creates run_dir, or run_dir-2, run_dir-3, ... when it exists (two runs started in the
        same second); returns the folder made (resume: --resume's run folder, as it is). OSError
        when the log folder is a file or cannot be created; KeyboardInterrupt, and no folder, after
        a signal (one sent during the imports)."""
        self.check_signals()
        if resume:
            return resume
        path, suffix = run_dir, 1
        while True:
            try:
                os.makedirs(path)
                self.made(path)
                return path
            except FileExistsError:
                suffix += 1
                path = f"{run_dir}-{suffix}"

    def made(self, path: str) -> None:
        """The run folder just made (the benchmark's bookkeeping holds it)."""

    def start(self, config: dict, run_dir: str):
        """The run starts in run_dir; config's device_name set when the script has not (JAX's)."""
        if "device_name" not in config:
            config["device_name"] = sys.modules["jax"].devices()[0].device_kind
        self.run_dir = run_dir
        self.num_iterations = config["num_iterations"]

    def setup_done(self, before_s: float = 0.0):
        pass

    def iteration_done(self, iteration: int, returns, writer, scalars: dict):
        """returns: each agent's mean episodic return of the iteration; writer: the run's
        SummaryWriter; scalars: what it logged. Prints the progress line."""
        self.iterations_completed = iteration + 1
        self.iteration_times.append(scalars["time/iteration"])
        line = progress(self.num_iterations, iteration, scalars, self.iteration_times)
        print(line, flush=True)

    def end_line(self, status: str) -> str:
        done = f"{self.iterations_completed}/{self.num_iterations}"
        return f"{status}: {done} iterations, logs in {self.run_dir}"

    def run(self, main: Callable[[], None], args_type):
        """main() with the stop signals caught. Exit codes: 2 for bad input (before the run folder
        is made), 130 when interrupted."""
        self.interrupts.install()
        try:
            # --resume RUN_DIR alone: the flags not given are the run's own
            sys.argv[1:] = with_run_flags(args_type, sys.argv[1:])
            main()
        except (ValueError, OSError, ImportError) as e:
            if self.run_dir is not None:
                raise
            refuse(e)  # an unknown env, a --log-dir that is a file, ...
        except KeyboardInterrupt:
            # main's `with SummaryWriter` flushed the events on the way out
            self.interrupts.exit(self.end_line("interrupted") if self.run_dir else "interrupted")
        print(self.end_line("completed"), flush=True)

"""The benchmark bookkeeping of the ppo_*.py scripts: signals, config.json and summary.json (part of
benchback-rl).

bench.sh and plot_results.py rely on what it writes. A script takes it in place of its plain
bookkeeping (core/plain_bookkeeping.py, whose calls it answers, and which a `./setup.sh starter`
copy keeps) when this file is beside it:

    book = Bookkeeping(START, Args, FRAMEWORK)  # the script's first lines, before JAX's imports
    ... in main(): make_run_dir, start (config.json), setup_done (setup_s), check_signals,
    iteration_done (as PlainBook's)
    book.run(main, Args)  # bad input refused, signals caught, summary.json written, exit codes

Signals (atomic.py, the policy of every entry point): SIGINT, SIGTERM and SIGHUP set a flag
that the script checks between phases, so that none is lost inside a compiler and a run started with
SIGINT ignored (a background job) still stops (a SIGHUP inherited ignored, nohup's, stays ignored);
a second signal stops the run at once. The run then ends with status "interrupted", its
summary.json, one line and exit code 130, never a traceback; stopped at once, by os._exit, as a
compile may still run on XLA's threads (the interpreter's exit raced them: a segfault).
Bad input (a ValueError, OSError or ImportError before the run folder is made: core/run_checks.py
checks the arguments first) is one line and exit code 2, and leaves no run folder. Any other failure
ends with status "failed": an OSError (a full disk, a removed log folder) with one line and exit
code 1, anything else with its traceback. config.json and summary.json are written by atomic.py's
write_json (a temporary file, then renamed), so they are never empty or half-written, and never
through a symbolic link in the run folder: a link planted there mid-run (atomic.LinkRefused, an
OSError) fails the run in one line, exit code 1, and what it leads to is left as it is.
"""

import importlib
import os
import platform
import resource
import shutil
import sys
import threading
import time
from importlib.metadata import version
from typing import Callable, Optional

from atomic import Interrupts, hold_folder, write_json
from core import env_ids
from core.command_line import before_imports, translate
from core.plain_bookkeeping import PlainBook, progress, with_run_flags


def __getattr__(name: str):
    """jax, and core/run_checks.py's functions (which import it), loaded at their first use, not
    when a script's first lines import this module (its --help answered before JAX's imports)."""
    if name == "jax":
        return importlib.import_module("jax")
    if name in ("accelerator", "check_args", "check_environment", "machine"):
        return getattr(importlib.import_module("core.run_checks"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# the packages whose versions config.json records, by framework
PACKAGES = {
    "linen": ("jax", "jaxlib", "flax", "optax", "gymnax"),
    "nnx": ("jax", "jaxlib", "flax", "optax", "gymnax"),
    "equinox": ("jax", "jaxlib", "equinox", "optax", "gymnax"),
    "torch": ("torch", "jax", "jaxlib", "gymnax"),
}


def exit_on_bad_environment(framework: str) -> None:
    """check_environment() for a script's first lines, before its imports start JAX (gymnax's does):
    its one line and exit code 2, not JAX's traceback. For the JAX scripts, also tensorboardX
    without torch."""
    from core.run_checks import check_environment

    try:
        check_environment()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if framework != "torch":
        import_tensorboardx_without_torch()


def import_tensorboardx_without_torch() -> None:
    """Imports tensorboardX with torch hidden from it: its writer imports torch whenever torch is
    installed (about 1 s on a CPU, a third of a JAX script's imports) only to accept torch tensors,
    which the JAX scripts never log. torch is hidden for that import only (other packages, SciPy's
    among them, look for it later)."""
    if "torch" in sys.modules or "tensorboardX" in sys.modules:
        return
    sys.modules["torch"] = None  # `import torch` raises ImportError, which tensorboardX expects
    try:
        import tensorboardX  # noqa: F401
    finally:
        del sys.modules["torch"]


def check_writer(writer, thread_errors: list) -> None:
    """OSError when tensorboardX's writer thread has died. It dies when a write fails (a full disk),
    and the run would then hang as soon as the writer's queue is full."""
    event_writer = writer._get_file_writer().event_writer
    if event_writer._worker.is_alive():
        return
    # else its close(), on leaving `with` and at exit, writes to the full disk again
    event_writer._closed = True
    why = f" ({thread_errors[-1]})" if thread_errors else ""
    raise OSError(f"the TensorBoard writer stopped{why}: is the disk full?")


def finish_wandb() -> None:
    """The W&B run of an interrupted run (--track) closed, with its exit code."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish(exit_code=130)


def missing_folders(path: str) -> list[str]:
    """The folders that os.makedirs(path) would create, path first."""
    missing = []
    while path and not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def quiet_os_errors(unraisable) -> None:
    """sys.unraisablehook once the run's error line has named an OSError (a full disk): one that
    nothing can catch (tensorboardX's writer closing at exit, on the same disk) prints nothing."""
    if not issubclass(unraisable.exc_type, OSError):
        sys.__unraisablehook__(unraisable)


def final_returns(returns: list, num_agents: int) -> list:
    """Each agent's final return, the mean of its last 10 iterations' returns (None: no episode of
    it ended in them), from the returns of each iteration, a list of one per agent."""
    import numpy as np

    finals = []
    for k in range(num_agents):
        last = [iteration[k] for iteration in returns[-10:] if not np.isnan(iteration[k])]
        finals.append(float(np.mean(last)) if last else None)
    return finals


# what the final return of the run's last line is (none: no episode ended in those iterations)
FINAL_RETURN_IS = "(the mean episodic return of the last 10 iterations)"


def said_return(finals: list) -> str:
    """The final return on the run's last line: one agent's, or with N agents their mean ± the
    standard deviation across agents ("none": no episode of any agent ended)."""
    import numpy as np

    known = [r for r in finals if r is not None]
    if not known:
        return "none"
    if len(finals) == 1:
        return f"{known[0]:.1f}"
    return f"{np.mean(known):.1f} ± {np.std(known):.1f} over {len(known)} of {len(finals)} agents"


def peak_rss_bytes() -> int:
    """The process's peak resident memory on the host, threads in: Linux's VmHWM, its own (the
    ru_maxrss of a process also holds its parent's peak at its exec); elsewhere ru_maxrss."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # in kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_device_bytes() -> Optional[int]:
    """The accelerator memory the run's frameworks held at their peak (JAX's allocator, and torch's
    when it used CUDA), summed; None on a CPU, where peak_rss_bytes holds it all."""
    import jax

    peaks = []
    stats = jax.devices()[0].memory_stats()  # None on a CPU
    if stats and "peak_bytes_in_use" in stats:
        peaks.append(stats["peak_bytes_in_use"])
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        peaks.append(torch.cuda.max_memory_allocated())
    return sum(peaks) if peaks else None


# JAX's compile events (jax.monitoring), each with the name of the function compiled
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
# the scripts' jitted functions, in the order the first iteration calls them (with
# --no-sync-timing: "iterations", rollout and update in one call); any other compile (the init,
# small eager ops outside them) is counted as "other"
COMPILED_FUNCTIONS = ("rollout", "update", "iterations")


def compiled_name(fun_name: str, phase: Optional[str] = None) -> str:
    """A compile event's function as summary.json names it: "jit(rollout)" -> "rollout"; a name
    outside COMPILED_FUNCTIONS is the phase's it came in (NNX's nnx.vmap names both functions
    "vmap_wrapper"), else "other"."""
    while fun_name.startswith("jit(") and fun_name.endswith(")"):
        fun_name = fun_name[len("jit(") : -1]
    if fun_name in COMPILED_FUNCTIONS:
        return fun_name
    return phase or "other"


class CompileTimes:
    """JAX's compile time per function, listened to from jax.monitoring: summed until freeze() (the
    end of the process's first iteration) as compile_s, and after it as recompile_s (which
    should stay empty: a recompilation is a bug worth seeing)."""

    def __init__(self):
        self.compile_s: dict[str, float] = {}
        self.recompile_s: dict[str, float] = {}
        self.frozen = False
        # the function of COMPILED_FUNCTIONS the first iteration is in (None: outside them)
        self.phase = None
        self.phases = iter(COMPILED_FUNCTIONS)
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(self.on_event)

    def on_event(self, event: str, duration_s: float, **metadata) -> None:
        if event not in COMPILE_EVENTS:
            return
        times = self.recompile_s if self.frozen else self.compile_s
        name = compiled_name(str(metadata.get("fun_name", "")), self.phase)
        times[name] = times.get(name, 0.0) + duration_s

    def next_phase(self) -> None:
        """The first iteration reached its next function (a script checks its signals before
        each)."""
        if not self.frozen:
            self.phase = next(self.phases, None)

    def freeze(self) -> None:
        self.frozen = True
        self.phase = None

    def close(self) -> None:
        import jax.monitoring

        jax.monitoring.unregister_event_duration_listener(self.on_event)


class Bookkeeping(PlainBook):
    def __init__(self, start: float, args_type=None, framework=None, packages: tuple = ()):
        """start: time.perf_counter() at the script's first line; args_type and framework: the
        script's Args and FRAMEWORK, whose command line and environment are checked now, before the
        script's heavy imports (--help, a bad flag, a missing package: core/command_line.py), the
        stop signals held until run(); packages: the versions config.json records (by default the
        framework's)."""
        if args_type is not None:
            before_imports(args_type, framework)
            exit_on_bad_environment(framework)
        self.start_time = start
        self.packages = PACKAGES.get(framework, packages)
        self.command = list(sys.argv)  # the command line as typed (run() reads it again)
        self.run_dir = None  # set by start(): from then on, the run must leave a summary.json
        # --resume's folder, the run's from setup_done() on: a resume refused or stopped before
        # leaves it as it was
        self.resumed_dir = None
        self.made_dirs = []  # the folders make_run_dir made, the run folder first
        # with --resume: the seconds the stopped run ran (the Saver's, given to setup_done)
        self.before_s = 0.0
        self.num_iterations = None
        self.num_agents = 1
        self.running = False  # while True, a second signal stops the run at once
        self.summary_error = None  # why summary.json could not be written
        # OSErrors that ended a thread (tensorboardX's writer on a full disk)
        self.thread_errors = []
        self.returns = []  # per iteration, each agent's mean episodic return (NaN: none ended)
        self.iteration_times = []  # this process's: the progress line's ETA
        self.compile_times = None  # made by run(), once the script's imports are done
        self.summary = {
            "status": "failed",
            "iterations_completed": 0,
            "import_s": None,  # run()'s: the end of the script's imports
            "setup_s": None,
            "total_s": None,
            "final_return": None,
            "final_returns": None,
            "signals": [],
            "compile_s": None,
            "recompile_s": None,
        }
        # the stop signals, listed in summary.json; a second one stops the run at once while it runs
        self.interrupts = Interrupts(
            "the next iteration boundary",
            armed=lambda: self.running,
            received=self.summary["signals"],
        )

    # ----------------------------------------------------------------------------------- signals
    def on_thread_error(self, hook_args):
        """An OSError ends a thread without a traceback; iteration_done() then fails the run with
        it, in one line."""
        if isinstance(hook_args.exc_value, OSError):
            self.thread_errors.append(hook_args.exc_value)
        else:
            threading.__excepthook__(hook_args)

    def check_signals(self):
        self.interrupts.check()
        if self.compile_times is not None and self.summary["setup_s"] is not None:
            # the loop checks before the rollout and before the update: its compiles are theirs
            self.compile_times.next_phase()

    # -------------------------------------------------------------------------------- the run
    def make_run_dir(self, run_dir: str, resume: Optional[str] = None) -> str:
        """PlainBook's, the folder held by this process (atomic.hold_folder: one writer), and the
        folders made for it noted (remove_run_dir's)."""
        missing = missing_folders(os.path.dirname(run_dir))
        path = super().make_run_dir(run_dir, resume)
        if not resume:
            self.made_dirs = [path, *missing]
        return path

    def made(self, path: str) -> None:
        hold_folder(path, "--log-dir")

    def start(self, config: dict, run_dir: str):
        """Adds the command line, the versions and the machine to config (so W&B gets them too), and
        writes it to config.json. With --resume, config.json stays the first start's (the run's
        identity), and the run goes on from its resume file's iteration in its folder from
        setup_done() on (the script's Saver has put the state back): until then, bad input (a
        refused resume) is exit code 2 and a stop says nothing ran, the folder left as it was."""
        import jax

        from core.run_checks import accelerator, machine

        config["command"] = self.command
        # the env's own packages too (envpool, Craftax, Brax, Playground), by their metadata: none
        # imported for it
        env = env_ids.packages(config.get("env", ""), config.get("env_backend", "gymnax"))
        packages = self.packages + env
        config["versions"] = {
            "python": platform.python_version(),
            **{p: version(p) for p in packages},
        }
        config.update(machine())
        # the device kind, the jaxlib and libtpu/CUDA versions, and the matmul precision in force
        # (torch's script names its own device_name: torch's device, kept)
        config.update({k: v for k, v in accelerator().items() if k not in config})
        # as the script set it (--matmul-precision): recorded, never changed here
        config["matmul_precision_in_force"] = jax.config.jax_default_matmul_precision
        if "torch" in packages:
            # the intra-op threads torch's ops run on (the scripts leave torch's default)
            config["torch_threads"] = sys.modules["torch"].get_num_threads()
        self.run_dir = None if config.get("resume") else run_dir
        self.resumed_dir = run_dir if config.get("resume") else None
        self.num_iterations = config["num_iterations"]
        self.num_agents = config.get("num_agents", 1)
        if self.compile_times is not None and config.get("sync_timing") is False:
            # the fast path: its first call, iterations(), is the first iteration's only function
            self.compile_times.phases = iter(COMPILED_FUNCTIONS[2:])
        self.running = True
        if not config.get("resume"):
            # never through a link in the run folder (atomic.check_inside)
            write_json(os.path.join(run_dir, "config.json"), config, given=run_dir)

    def setup_done(self, before_s: float = 0.0):
        """before_s: with --resume, the seconds the stopped run ran (the script's Saver read them),
        from which total_s counts on."""
        self.summary["setup_s"] = time.perf_counter() - self.start_time
        if self.resumed_dir and self.run_dir is None:
            from core import resuming

            # the script's Saver, made before, checked the stopped run, and put its state back
            resume = resuming.read_resume(self.resumed_dir)
            self.returns = list(resume.returns)
            self.summary["iterations_completed"] = resume.iteration
            # the analysis reads a resumed run's events files as one run, and does not time it
            self.summary["resumed_at"] = [*resume.resumed_at, resume.iteration]
            self.before_s = before_s
            self.run_dir = self.resumed_dir

    def iteration_done(self, iteration: int, returns, writer, scalars: dict):
        """returns: each agent's mean episodic return of the iteration (NaN: no episode ended);
        writer: the run's SummaryWriter; scalars: what it logged. Prints the progress line."""
        self.summary["iterations_completed"] = iteration + 1
        self.returns.append([float(r) for r in returns])
        check_writer(writer, self.thread_errors)
        self.iteration_times.append(scalars["time/iteration"])
        if self.compile_times is not None and len(self.iteration_times) == 1:
            # the process's first iteration compiled; what compiles later is a recompilation
            self.compile_times.freeze()
        line = progress(self.num_iterations, iteration, scalars, self.iteration_times)
        print(line, flush=True)

    def finish(self, status: str, error: Optional[str] = None):
        """summary.json, and the line that ends the run's output."""
        self.running = False  # a signal from here on must not stop the writing
        nothing_ran = status == "interrupted" and self.summary["iterations_completed"] == 0
        if nothing_ran and self.run_dir is None:
            left = "no run folder made"
            if self.resumed_dir:
                left = f"{self.resumed_dir} left as it was"
            print(f"interrupted before the first iteration: nothing ran, {left}")
        if self.run_dir is None:  # no run folder was made
            return
        # Stopped before its first iteration ended (in the imports, the setup or iteration 0's
        # compile), a run measured nothing: it leaves no folder, rather than one that bench.sh's
        # resume would run again anyway and the analysis would only list as skipped. The sweep's log
        # keeps the attempt.
        if nothing_ran and self.remove_run_dir():
            print(f"interrupted before the first iteration: nothing ran, {self.run_dir} removed")
            return
        self.summary["status"] = status
        process_s = time.perf_counter() - self.start_time
        # the whole run's, every process's; a resumed run's process_total_s is this process's alone
        self.summary["total_s"] = self.before_s + process_s
        if self.summary.get("resumed_at"):
            self.summary["process_total_s"] = process_s
        import numpy as np

        finals = final_returns(self.returns, self.num_agents)
        self.summary["final_returns"] = finals
        known = [r for r in finals if r is not None]
        # the agents' mean
        self.summary["final_return"] = float(np.mean(known)) if known else None
        self.summary["peak_rss_bytes"] = peak_rss_bytes()
        self.summary["peak_device_bytes"] = peak_device_bytes()
        if self.compile_times is not None:
            self.summary["compile_s"] = self.compile_times.compile_s
            self.summary["recompile_s"] = self.compile_times.recompile_s
        if error:
            self.summary["error"] = error
        try:
            write_json(os.path.join(self.run_dir, "summary.json"), self.summary, given=self.run_dir)
        except OSError as e:  # a full disk, a link planted: said on the run's one error line
            self.summary_error = f"summary.json not written ({e})"
        done = f"{self.summary['iterations_completed']}/{self.num_iterations}"
        total, final = self.summary["total_s"], said_return(finals)
        # the final return is said with what it is: not the last iteration's return
        print(
            f"{status}: {done} iterations, total {total:.1f}s, final return {final} "
            f"{FINAL_RETURN_IS}, logs in {self.run_dir}"
        )

    def remove_run_dir(self) -> bool:
        """Removes the run folder, and the log folders make_run_dir made for it where they are empty
        (no other run writes there); False, with the folder left, when it cannot."""
        finish_wandb()  # a W&B run's files may be in the folder: closed first
        try:
            shutil.rmtree(self.run_dir)
        except OSError:
            return False
        for folder in self.made_dirs[1:]:  # innermost first
            try:
                os.rmdir(folder)
            except OSError:  # not empty: another run's
                break
        return True

    def end(self, status: str, error: Optional[Exception] = None, one_line: bool = False):
        """finish(), then one error line: the error itself when one_line, and summary.json when it
        was not written."""
        self.finish(status, f"{type(error).__name__}: {error}" if error else None)
        problems = [str(error)] if one_line else []
        if self.summary_error:
            problems.append(self.summary_error)
        if problems:
            print(f"error: {'; '.join(problems)}", file=sys.stderr)
            # the full disk said once: a writer that fails to close again at exit says nothing more
            sys.unraisablehook = quiet_os_errors

    def run(self, main: Callable[[], None], args_type):
        """main() with the signals caught and summary.json written whatever happens. Exit codes: 2
        for bad input (before the run folder is made), 130 when interrupted, 1 when failed."""
        from core.run_checks import check_args

        self.summary["import_s"] = time.perf_counter() - self.start_time
        # torch's own compile modes are not timed: its compile_s stays null
        if "torch" not in self.packages and self.compile_times is None:
            self.compile_times = CompileTimes()
        threading.excepthook = self.on_thread_error
        # the stop signals caught, and those held since the script's first lines delivered
        # (core/command_line.py's before_imports, in __init__)
        self.interrupts.install()
        # config.json's command: as typed (CleanRL's flags, --resume alone), before the rewrites
        self.command = list(sys.argv)
        try:
            # CleanRL's booleans read as ours (--anneal-lr False): main() parses the result
            sys.argv[1:] = translate(args_type, sys.argv[1:])
            # --resume RUN_DIR alone: the flags not given are the run's own (config.json's)
            sys.argv[1:] = with_run_flags(args_type, sys.argv[1:])
            check_args(args_type, sys.argv[1:])
            main()
        except (ValueError, OSError, ImportError) as e:
            if self.run_dir is None:  # bad input: an unknown env, a --log-dir that is a file, ...
                print(f"error: {e}", file=sys.stderr)
                sys.exit(2)
            if not isinstance(e, OSError):  # a bug: its traceback
                self.end("failed", e)
                raise
            self.end("failed", e, one_line=True)  # a full disk, a removed log folder
            sys.exit(1)
        except KeyboardInterrupt:
            self.end("interrupted")
            finish_wandb()  # before an os._exit, which skips W&B's own closing
            self.interrupts.exit()
        except Exception as e:
            self.end("failed", e)
            raise
        self.end("completed")
        if self.summary_error:
            sys.exit(1)

    def wrap(self, main: Callable[[], None], args_type) -> Callable[[], None]:
        """main, run under the bookkeeping; args_type: the script's Args, checked before main()
        starts."""

        def bookkept_main():
            self.run(main, args_type)

        return bookkept_main

"""Saver: what a ppo_*.py script saves while it trains (part of benchback-rl). --save-model: each
agent's model file (checkpoint.py) when the run ends, however it ends; --save-every: the run's
whole state every N iterations, and --resume: that state put back (core/resuming.py). The scripts
import it lazily, only with those flags; it needs no bookkeeping.
"""

import math
import os
import subprocess
import sys
from typing import NamedTuple

import numpy as np

from atomic import hold_folder
from checkpoint import FILENAME, BadCheckpoint, architecture, save, shared
from core.event_files import discard_events, flush_events, trim_events
from core.resuming import (
    RESUME_FILE,
    WHERE_FLAGS,
    Resume,
    check_resumable,
    resume_file,
    run_folder,
    save_resume,
    time_before,
    tree_arrays,
    tree_with,
)


def commit_of(folder: str) -> str:
    """The git HEAD of the folder's repository, or "unknown" (no git, not a repository)."""
    try:
        done = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


class Snapshot(NamedTuple):
    """What a Saver keeps of the last finished iteration, a value per agent."""

    params: list  # each agent's shared tensors
    obs_norm: list  # each agent's observation statistics (env_normalize.obs_norms), or Nones
    returns: tuple  # each finished iteration's mean episodic returns, one per agent


class Saver:
    """--save-model: each agent's model.safetensors when the run ends, however it ends: the policy
    of the last finished iteration (none when none finished). --save-every: the run's whole state
    in resume.safetensors every N iterations; --resume: that state put back. A context manager
    around the training loop; it needs no bookkeeping."""

    def __init__(self, run_dir: str, config: dict, script: str):
        """config: the script's Args as a dict, with "framework"; script: its __file__ (for the
        commit). The run folder is held (atomic.hold_folder) for the process's life: one writer at a
        time. With --resume, the folder must be a stopped run of the same flags, read whole and
        checked here (check_resumable), before anything is written; Saver.resume checks its arrays
        against the run's fresh state."""
        self.run_dir = run_dir
        self.config = dict(config)  # as it is now: the bookkeeping adds the machine's keys later
        self.commit = commit_of(os.path.dirname(os.path.abspath(script)))
        self.command = list(sys.argv)
        # one attribute, replaced whole: a signal cannot stop the run between a policy and its count
        self.last = Snapshot([], [], ())
        self.resumed_at = ()
        self.saved = 0  # the iteration that the run folder's resume file holds
        self.stopped = None  # with --resume: the stopped run, as check_resumable read it
        # with --resume: the seconds the stopped run ran (time_before), time/elapsed's start
        self.before_s = 0.0
        if not config.get("resume"):
            hold_folder(run_dir, "--log-dir")
            return
        hold_folder(run_folder(run_dir), "--resume")
        self.stopped = check_resumable(run_dir, self.config)
        resume = self.stopped.resume
        self.last = Snapshot([], [], resume.returns)
        self.resumed_at = (*resume.resumed_at, resume.iteration)
        self.saved = resume.iteration
        self.before_s = time_before(run_dir, self.stopped.events)

    @property
    def iteration(self) -> int:
        """The iterations completed, those before a resume included."""
        return len(self.last.returns)

    def resume(self, training, runner, writer=None):
        """(training, runner, iterations completed): the run's fresh state with the resume file's
        arrays in it, bit for bit; BadCheckpoint, and the run folder as it was (the events file
        that writer made removed), when they are not of its shapes and dtypes. writer: the run's
        SummaryWriter, whose TensorBoard then hides what the stopped run logged after its save (a
        purge mark at the next iteration's step)."""
        # read and checked, its flags too, when this Saver was made
        stopped, path = self.stopped, resume_file(self.run_dir)
        try:
            training, runner = tree_with(path, (training, runner), stopped.arrays)
        except BadCheckpoint:
            if writer is not None:
                discard_events(writer)
            raise
        iteration = stopped.iteration
        # the first write: what the stopped run logged after its save is logged again, and
        # TensorBoard and tbparse then read each step once
        trim_events(self.run_dir, stopped.events, iteration * self.config["batch_size"])
        self.stopped = None  # its arrays and events are not needed again
        if writer is not None:
            from tensorboardX.proto.event_pb2 import Event, SessionLog

            step = (iteration + 1) * self.config["batch_size"]
            start = SessionLog(status=SessionLog.START)
            writer._get_file_writer().add_event(Event(step=step, session_log=start))
        print(f"{RESUME_FILE}: resumed after iteration {iteration}", flush=True)
        return training, runner, iteration

    def iteration_done(self, layers, runner, returns, training, writer=None) -> None:
        """After each iteration. layers: the script's to_shared of its agents, (actor, critic,
        log_std) with the agent axis first (copied here: training goes on); runner: the envs'
        state; returns: each agent's mean episodic return (NaN: none ended); training: the rest of
        the run's state (a pytree of JAX or NumPy arrays, or a function that returns one), saved
        with the runner every save_every iterations; writer: the run's SummaryWriter, whose events
        are all written out before each save, so that the events hold every iteration that the
        resume file holds, however the run ends after it."""
        returns = tuple(float(r) for r in returns)
        import jax

        # to the host once, then each agent's slice
        layers = jax.tree.map(np.asarray, layers)
        params = [shared(*jax.tree.map(lambda x: x[k], layers)) for k in range(len(returns))]
        obs_norm = [None] * len(returns)
        if hasattr(runner.env_state, "obs_stats"):  # --norm-obs: its statistics go with the policy
            import env_normalize

            obs_norm = env_normalize.obs_norms(runner.env_state.obs_stats, len(returns))
        self.last = Snapshot(params, obs_norm, (*self.last.returns, returns))
        every = self.config.get("save_every") or 0
        if every and self.iteration % every == 0:
            if callable(training):
                training = training()
            if writer is not None:
                flush_events(writer)
            flags = {k: v for k, v in self.config.items() if k not in WHERE_FLAGS}
            resume = Resume(self.iteration, self.last.returns, self.resumed_at, flags)
            save_resume(self.run_dir, tree_arrays((training, runner)), resume)
            self.saved = self.iteration
            print(f"{RESUME_FILE}: iteration {self.saved} saved in {self.run_dir}", flush=True)

    def path(self, k: int) -> str:
        """Agent k's model file: in the run folder, or its agent_k folder when there are more."""
        folder = self.run_dir if len(self.last.params) == 1 else f"{self.run_dir}/agent_{k}"
        return os.path.join(folder, FILENAME)

    def metadata(self, k: int) -> dict:
        """Agent k's metadata: its seed is the run's seed + k."""
        params, returns = self.last.params[k], [agent[k] for agent in self.last.returns]
        obs_dim, _, num_actions = architecture(params)
        last_10 = [r for r in returns[-10:] if not math.isnan(r)]  # as summary.json's final_return
        keys = ("framework", "env", "env_backend", "model_size", "dtype", "norm_obs")
        return {key: self.config[key] for key in keys} | {
            "seed": self.config["seed"] + k,
            "obs_shape": [obs_dim],
            "action_kind": "continuous" if "log_std" in params else "discrete",
            "num_actions": num_actions,
            "iteration": len(returns),
            "final_return": float(np.mean(last_10)) if last_10 else None,
            "commit": self.commit,
            "command": self.command,
        }

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc_info):
        if exc_type is KeyboardInterrupt and self.saved:
            script = os.path.basename(self.command[0]) if self.command else "ppo_*.py"
            print(
                f"{RESUME_FILE} holds iteration {self.saved}: continue with `python {script} "
                f"--resume {self.run_dir}`",
                flush=True,
            )
        # no iteration finished (since the resume), or no --save-model
        if not self.last.params or not self.config.get("save_model", True):
            return
        for k, (params, obs_norm) in enumerate(zip(self.last.params, self.last.obs_norm)):
            path = self.path(k)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                # never through a link in the run folder (an agent_k folder or the file itself)
                save(path, params, obs_norm, self.metadata(k), given=self.run_dir)
            except BadCheckpoint as e:
                # a policy gone NaN: nothing worth keeping; the run ends as it would have
                print(f"error: {FILENAME} not written: {e}", file=sys.stderr)
                continue
            print(f"{FILENAME}: the policy of iteration {self.iteration}, in {path}", flush=True)

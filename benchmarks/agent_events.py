"""What does writing N agents' scalars to TensorBoard cost the host, each iteration? The templates
gave each of N > 1 agents a SummaryWriter of its own (RUN_DIR/agent_k, which TensorBoard overlays)
and called add_scalar once per scalar: N x 9 calls an iteration, each a protobuf event, a lock and a
queue for the writer's thread, and N threads and open files. They now write one event an
iteration to the run's one events file. This times three ways of writing the same values:

- "a call per scalar": the templates' former way (a writer per agent, add_scalar per tag);
- "an event per agent": a writer per agent, each agent's tags in one event (add_summary once);
- "one event": one writer, every agent's tags (agent_k/TAG) in one event of the run's own file:
  the templates' way now (log_scalars).

Each way writes its own folder, its writers made beforehand as a run makes them. Per iteration:
the calls' time, then the time until every writer has flushed (the writers' threads' work done);
the ways alternate within each iteration, in an order rotating iteration by iteration, and the
table gives the median over iterations (the first --warmup left out) and each way's ratio to the
former way.

    python -m benchmarks.agent_events --out results/benchmarks/agent_events_cpu.json
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary

from atomic import check_outputs
from benchmarks.common import (
    OUT_HELP,
    check_counts,
    check_or_exit,
    machine,
    machine_text,
    show_table,
)
from core.option_checks import check_int

TOOL = "benchmarks.agent_events"
# the per-agent tags the templates log each iteration
TAGS = (
    "charts/episodic_return",
    "charts/episodic_length",
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/old_approx_kl",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
)
FORMER = "a call per scalar"


def per_scalar(writers, values, step):
    for k, writer in enumerate(writers):
        for tag, column in zip(TAGS, values):
            writer.add_scalar(tag, column[k], step)


def per_agent(writers, values, step):
    for k, writer in enumerate(writers):
        own = [Summary.Value(tag=tag, simple_value=column[k]) for tag, column in zip(TAGS, values)]
        writer.file_writer.add_summary(Summary(value=own), step)


def one_event(writers, values, step):
    (writer,) = writers
    every = []
    for k in range(len(values[0])):
        for tag, column in zip(TAGS, values):
            every.append(Summary.Value(tag=f"agent_{k}/{tag}", simple_value=column[k]))
    writer.file_writer.add_summary(Summary(value=every), step)


# name: (how it writes, whether it has a writer per agent)
WAYS = {FORMER: (per_scalar, True), "an event per agent": (per_agent, True)}
WAYS["one event"] = (one_event, False)


def measure(agents: int, iterations: int, warmup: int, folder: str) -> list[dict]:
    """One row per way: the median ms per iteration of its calls and of its calls until flushed."""
    rng = np.random.default_rng(0)
    writers = {}
    for i, (name, (_, per_agent_writers)) in enumerate(WAYS.items()):
        root = os.path.join(folder, f"way{i}")
        folders = [os.path.join(root, f"agent_{k}") for k in range(agents)]
        writers[name] = (
            [SummaryWriter(f) for f in folders] if per_agent_writers else [SummaryWriter(root)]
        )
    times = {name: ([], []) for name in WAYS}
    names = list(WAYS)
    for step in range(warmup + iterations):
        # the values as the templates hold them: one float array per tag, fetched from the device
        values = [rng.random(agents, dtype=np.float32) for _ in TAGS]
        shift = step % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            WAYS[name][0](writers[name], values, step)
            called = time.perf_counter() - start
            for writer in writers[name]:
                writer.flush()
            flushed = time.perf_counter() - start
            if step >= warmup:
                times[name][0].append(called * 1e3)
                times[name][1].append(flushed * 1e3)
    for group in writers.values():
        for writer in group:
            writer.close()
    base = statistics.median(times[FORMER][0]), statistics.median(times[FORMER][1])
    rows = []
    for name, (called, flushed) in times.items():
        calls_ms, flushed_ms = statistics.median(called), statistics.median(flushed)
        rows.append(
            {
                "agents": agents,
                "way": name,
                "calls_ms": calls_ms,
                "calls_ratio": calls_ms / base[0],
                "flushed_ms": flushed_ms,
                "flushed_ratio": flushed_ms / base[1],
            }
        )
    return rows


def markdown(rows: list[dict], header: str) -> str:
    lines = [
        header,
        "",
        "| agents | way | calls, ms | calls / former | until flushed, ms | flushed / former |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['agents']} | {row['way']} | {row['calls_ms']:.2f} | "
            f"{row['calls_ratio']:.3f}x | {row['flushed_ms']:.2f} | {row['flushed_ratio']:.3f}x |"
        )
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    """The options, checked before anything is measured: a bad one ends the program in one line,
    exit status 2."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--iterations", type=int, default=30, help="timed iterations per way")
    parser.add_argument("--warmup", type=int, default=3, help="iterations left out first")
    parser.add_argument("--out", help=OUT_HELP)
    args = parser.parse_args(argv)

    def check():
        check_counts(args, "iterations")
        for n in args.agents:
            check_int("--agents", n, 1)
        check_int("--warmup", args.warmup, 0)
        if args.out:
            check_outputs(TOOL, args.out)

    check_or_exit(check)
    return args


def main(argv=None):
    args = parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in args.agents:
            rows += measure(n, args.iterations, args.warmup, os.path.join(folder, str(n)))
            print(f"{n} agents measured", flush=True)
    header = (
        f"ms per iteration to write each agent's {len(TAGS)} scalars, the median of "
        f"{args.iterations} iterations ({args.warmup} left out first), the ways alternating in a "
        f"rotating order; on {machine_text(machine())}"
    )
    table = markdown(rows, header)
    show_table(TOOL, args.out, {"header": header, "rows": rows}, table)


if __name__ == "__main__":
    main()

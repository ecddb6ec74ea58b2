"""A run folder's TensorBoard events files, for --resume (part of benchback-rl): read and checked
(read_run_events), trimmed to the resumed iteration (trim_events), and a SummaryWriter's events
written out before each save (flush_events).
"""

import os
import struct
from contextlib import suppress
from typing import NamedTuple

from atomic import write_file
from checkpoint import BadCheckpoint, is_count

EVENTS_PREFIX = "events.out.tfevents."


# the most bytes an events file of a run may hold: its first events (the file's version, the
# hyperparameters' table, a resume's purge mark), then per iteration and agent the scalars of one
# event (~0.6 kB for a run, ~0.5 kB more per agent of several under agent_k/)
EVENTS_HEAD_BYTES, EVENTS_ITERATION_BYTES = 2**16, 2**11


class EventRecord(NamedTuple):
    """A record of an events file: the step of its event, whether it logged an iteration (its
    time/iteration), and its bytes."""

    step: int
    iteration: bool
    data: bytes


def event_records(data: bytes) -> list[bytes]:
    """The records of an events file (TFRecord: a length, its CRC, the data, its CRC), each as its
    bytes; a record cut short (the run stopped while writing it) is left out."""
    records, at = [], 0
    while at + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[at : at + 8])
        end = at + 12 + length + 4
        if end > len(data):
            break
        records.append(data[at:end])
        at = end
    return records


def event_of(record: bytes):
    """The TensorBoard event a record holds: its data, between the length's CRC and its own."""
    from tensorboardX.proto.event_pb2 import Event

    return Event.FromString(record[12:-4])


def events_paths(run_dir: str) -> list[str]:
    """The events files of a run folder and of its agent_k folders (an older run's)."""
    folders = [run_dir] + [
        entry.path
        for entry in os.scandir(run_dir)
        if entry.name.startswith("agent_") and entry.is_dir(follow_symlinks=False)
    ]
    return [
        entry.path
        for folder in folders
        for entry in sorted(os.scandir(folder), key=lambda entry: entry.name)
        if entry.name.startswith(EVENTS_PREFIX) and entry.is_file()
    ]


def read_run_events(run_dir: str, config: dict) -> dict[str, list[EventRecord]]:
    """Each events file of a run folder (events_paths): its records, each read as the TensorBoard
    event it must be. BadCheckpoint, one line, for a file larger than the run's config (its
    num_iterations, num_agents) can have logged (read no further), or a record that is no event."""
    from google.protobuf.message import DecodeError

    agents = config.get("num_agents", 1)
    agents = agents if is_count(agents) else 1
    bound = EVENTS_HEAD_BYTES + EVENTS_ITERATION_BYTES * config["num_iterations"] * (1 + agents)
    events = {}
    for path in events_paths(run_dir):
        with open(path, "rb") as f:
            data = f.read(bound + 1)
        if len(data) > bound:
            raise BadCheckpoint(
                f"{path}: more than the {bound:,} bytes that a run of {config['num_iterations']} "
                "iterations logs: not this run's events"
            )
        records = []
        for record in event_records(data):
            try:
                event = event_of(record)
            except DecodeError:
                raise BadCheckpoint(
                    f"{path}: a record that is not a TensorBoard event: not this run's events"
                ) from None
            logged = any(value.tag == "time/iteration" for value in event.summary.value)
            records.append(EventRecord(event.step, logged, record))
        events[path] = records
    return events


def trim_events(run_dir, events: dict[str, list[EventRecord]], last_step: int) -> None:
    """Rewrites each events file of events (read_run_events: those of the stopped run, not the
    resumed one's) without the events logged after last_step (the resume file's): the resumed run
    logs them again, and each step is then read once (tbparse, TensorBoard). Never through a link
    (write_file)."""
    for path, records in events.items():
        kept = [record.data for record in records if record.step <= last_step]
        if len(kept) < len(records):
            write_file(path, b"".join(kept), given=os.fspath(run_dir))


# ---------------------------------------------------------------- the run's SummaryWriter
def flush_events(writer) -> None:
    """Every event given to writer (a tensorboardX SummaryWriter) written to its file: its flush()
    writes the file's buffer out, but not the events still queued for its thread (which writes
    them out every flush_secs, 120 s). The thread is stopped once it has written them all (stop()
    queues its mark after them), the file flushed, and a new thread started on the same queue.
    OSError when the thread has died (a full disk): no save then, the events would lack it."""
    events = writer._get_file_writer().event_writer
    worker = events._worker
    if not worker.is_alive():
        raise OSError("the TensorBoard writer stopped (is the disk full?): the run is not saved")
    worker.stop()
    events.flush()
    again = type(worker)(events._event_queue, events._ev_writer, events._flush_secs)
    again.start()
    events._worker = again


def discard_events(writer) -> None:
    """writer (a tensorboardX SummaryWriter) closed, and the events file it made removed: a resume
    refused leaves the run folder as it was."""
    path = writer._get_file_writer().event_writer._ev_writer._file_name
    writer.close()
    with suppress(FileNotFoundError):
        os.remove(path)

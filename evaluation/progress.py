"""What evaluate.py tells as it goes (part of benchback-rl): a "wrote PATH" line for each file it
writes, and a progress line every few seconds on a long job (a video's frames), on stdout.

    progress.wrote(path, "500 frames")           # wrote replay.gif (500 frames)
    counter = progress.Progress("replay.gif", total=500, unit="frames")
    counter.step()                               # a line when EVERY_S have passed since the last
"""

import time
from typing import Callable, Optional

# the seconds between two progress lines: a job shorter than this prints none
EVERY_S = 3.0


def wrote(path, detail: str = "") -> None:
    """The line that announces a file written: "wrote PATH (detail)"."""
    print(f"wrote {path}" + (f" ({detail})" if detail else ""), flush=True)


class Progress:
    """A count of a job's steps: "WHAT: done/total unit, N s, about M s left" once EVERY_S have
    passed since the start or the last line (the total, and the time left, only when known)."""

    def __init__(
        self,
        what: str,
        total: Optional[int] = None,
        unit: str = "frames",
        clock: Callable[[], float] = time.monotonic,
    ):
        self.what, self.total, self.unit, self.clock = what, total, unit, clock
        self.done = 0
        self.start = self.last = clock()

    def step(self, count: int = 1) -> None:
        self.done += count
        now = self.clock()
        if now - self.last >= EVERY_S:
            self.last = now
            print(self.line(now), flush=True)

    def line(self, now: float) -> str:
        elapsed = now - self.start
        if not self.total:
            return f"{self.what}: {self.done} {self.unit}, {elapsed:.0f} s"
        text = f"{self.what}: {self.done}/{self.total} {self.unit}, {elapsed:.0f} s"
        if 0 < self.done < self.total:
            # the steps so far at their mean pace
            text += f", about {elapsed * (self.total - self.done) / self.done:.0f} s left"
        return text

"""The checks of an option's value, one function each: a count, an integer range, seconds, a shard,
a list.

Each raises BadOption (a ValueError), whose message names the option, the bad value and the valid
choices: the sweep prints it on one line and exits 2, sweep/env_timing.py likewise. The bounds of
every count and number of seconds a sweep takes live here too."""

import math
from typing import Optional

# the name in the messages: bench.sh is the entry point of the sweep
PROG = "bench.sh"


class BadOption(ValueError):
    """A bad option value; the message names it and the valid choices."""


def ascii_digits(text: str) -> bool:
    """ASCII digits only: str.isdigit() and int() also take '²' or '٣', which no one means as a
    count."""
    return text.isascii() and text.isdigit()


# The bounds of the sizes a sweep takes: each larger value is refused in one line, before anything
# is planned. runs in a sweep's matrix: planning as many takes seconds, running them years; also the
# most seeds, shards (--shard K/N), array tasks and tasks at once one sweep can use
MAX_RUNS = 100_000
# --iterations and --cpus (the runs' --env-threads): what a 32-bit integer holds, JAX's default
MAX_COUNT = 2**31 - 1
# --timeout and --kill-after: 30 days
MAX_SECONDS = 30 * 24 * 3600


def shown(value: str) -> str:
    """A value for a message: repr, cut short when it is long (a count of 5000 digits)."""
    return repr(value) if len(value) <= 40 else f"{value[:20]!r}... ({len(value)} characters)"


def bounded_int(option: str, value: str, low: int, high: int) -> int:
    """An integer from low to high, of ASCII digits; BadOption names the value and the valid range.
    The digits are counted before int() reads them: int() refuses a string of more than 4300 digits
    with a traceback."""
    digits = value.lstrip("0") or "0" if ascii_digits(value) else ""
    if not digits or len(digits) > len(str(high)):
        raise BadOption(f"{option} must be an integer from {low} to {high}, got {shown(value)}")
    return check_int(option, int(digits), low, high, shown(value))


def check_int(option: str, value: int, low: int, high: int = MAX_COUNT, said: str = "") -> int:
    """`value` when it is from low to high; else BadOption naming the option, the value (as `said`,
    when given) and the valid range. The one range check of the sweep's options and
    sweep/env_timing.py's."""
    if not low <= value <= high:
        raise BadOption(f"{option} must be an integer from {low} to {high}, got {said or value!r}")
    return value


def positive_int(option: str, value: Optional[str], high: int = MAX_COUNT) -> Optional[int]:
    return None if value is None else bounded_int(option, value, 1, high)


def cpus(value: Optional[str]) -> Optional[int]:
    """bench.sh --cpus N: every run's cores, threads and --env-threads (envpool's); None when not
    given."""
    return positive_int("--cpus", value)


def shard(value: str) -> tuple[int, int]:
    k, _, n = value.partition("/")
    try:
        num = bounded_int("--shard", n, 1, MAX_RUNS)
        return bounded_int("--shard", k, 0, num - 1), num
    except BadOption:
        raise BadOption(
            f"--shard must be K/N with 0 <= K < N <= {MAX_RUNS}, got {shown(value)}"
        ) from None


def seconds(option: str, value: str, positive: bool) -> float:
    """A number of seconds, above 0 (`positive`) or from 0, up to MAX_SECONDS; BadOption names the
    value."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    # nan and inf fail it too
    if not ((0 < number) if positive else (0 <= number)) or not number <= MAX_SECONDS:
        raise BadOption(
            f"{option} must be a number of seconds up to {MAX_SECONDS} (30 days), got "
            f"{shown(value)}"
        )
    return number


def choices(
    option: str, value: Optional[str], valid: tuple[str, ...], extra=None
) -> tuple[str, ...]:
    """The items of a comma-separated option (all of `valid` when not given), each checked against
    `valid`.

    `extra(name)` may accept a name outside `valid` (the envs: any gymnax env id)."""
    if value is None:
        return valid
    items = tuple(dict.fromkeys(item.strip() for item in value.split(",") if item.strip()))
    if not items:
        raise BadOption(f"{option} is empty; valid choices: {', '.join(valid)}")
    for item in items:
        if item not in valid and not (extra and extra(item)):
            more = " or another gymnax env id the scripts can train" if extra else ""
            raise BadOption(
                f"unknown value {item!r} in {option}; valid choices: {', '.join(valid)}{more}"
            )
    return items

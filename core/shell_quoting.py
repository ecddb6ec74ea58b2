"""Words quoted for bash, one line each whatever they hold: the dry run's commands.

bash reads a control character (a newline, a tab, ...) as the end of a word or a line; such a word
is written with $'...' escapes."""

import shlex


def control_characters(text: str) -> list[str]:
    return [c for c in text if ord(c) < 32 or ord(c) == 127]


def shell_word(word: str) -> str:
    """A word quoted for bash on one line: shlex.quote, or $'...' with \\xHH escapes when it holds a
    control character (a dry run prints one command a line, whatever the arguments hold)."""
    if not control_characters(word):
        return shlex.quote(word)
    escaped = {"\\": "\\\\", "'": "\\'"}
    return (
        "$'"
        + "".join(f"\\x{ord(c):02x}" if control_characters(c) else escaped.get(c, c) for c in word)
        + "'"
    )

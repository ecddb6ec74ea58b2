"""--slurm-args read as sbatch reads its options, into #SBATCH lines: those bench.sh sets itself are refused.

sbatch's options, as its parser knows them: sbatch reads the #SBATCH lines with getopt_long, so a unique prefix of a
long option is that option (--arr=0-3 is --array), an ambiguous one is an error, and a letter's value may be
attached, after other letters (-Ha5 is --hold --array=5). The table of Slurm 22.05 (the options of
src/common/slurm_opt.c that sbatch takes; `sbatch --help` lists most): each long option by what it takes, and the
letters. (tasks-per-node is another name of ntasks-per-node.)
"""

import shlex
from typing import Optional

from sweep.option_checks import BadOption
from sweep.shell_quoting import control_characters

# bench.sh gets SIGTERM this long before the time limit: the run in progress saves its summary
SIGNAL_BEFORE_S = 120

SBATCH_NO_VALUE = (
    "contiguous help hold ignore-pbs no-requeue overcommit oversubscribe parsable quiet reboot requeue spread-job "
    "test-only usage use-min-nodes verbose version wait"
).split()
SBATCH_OPTIONAL_VALUE = "exclusive get-user-env nice no-kill propagate".split()  # --name=VALUE only
SBATCH_VALUE = (  # --name=VALUE or --name VALUE
    "account acctg-freq array batch bb bbf begin chdir cluster cluster-constraint clusters comment constraint "
    "container context core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency "
    "distribution error exclude export export-file extra-node-info gid gpu-bind gpu-freq gpus gpus-per-node "
    "gpus-per-socket gpus-per-task gres gres-flags hint input job-name kill-on-invalid-dep licenses mail-type "
    "mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network nodefile nodelist nodes ntasks "
    "ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres open-mode output partition "
    "power prefer priority profile qos reservation signal sockets-per-node switches tasks-per-node thread-spec "
    "threads-per-core time time-min tmp uid wait-all-nodes wckey wrap"
).split()
SBATCH_LETTERS = dict(
    pair.split(":")
    for pair in (
        "A:account a:array b:begin B:extra-node-info C:constraint c:cpus-per-task D:chdir d:dependency e:error "
        "F:nodefile G:gpus h:help H:hold i:input J:job-name k:no-kill L:licenses M:clusters m:distribution N:nodes "
        "n:ntasks o:output O:overcommit p:partition q:qos Q:quiet S:core-spec s:oversubscribe t:time v:verbose "
        "V:version w:nodelist W:wait x:exclude"
    ).split()
)
# What bench.sh sets (or what would undo it), which --slurm-args must not: option -> what bench.sh makes of it.
# --job-name and --time it sets too, but a later line may change them (--time: see sbatch_script()).
SBATCH_OWN = {
    "array": "the job array, from --slurm-tasks and --slurm-parallel",
    "output": "each task's log, {log-dir}/logs/slurm/%A_%a.out",
    "error": "each task's log, {log-dir}/logs/slurm/%A_%a.out, errors included",
    "wrap": "the job's script",
    "signal": f"SIGTERM {SIGNAL_BEFORE_S} s before the time limit, so that the run in progress saves its summary",
    "exclusive": "a node of its own for each task",
    "oversubscribe": "a node of its own for each task (--exclusive)",
    "nodes": "one node for each task",
    "ntasks": "one task for each array task",
}


def sbatch_long_option(word: str) -> Optional[str]:
    """The sbatch option that a word --NAME or --NAME=VALUE is, as getopt_long finds it: NAME itself, else the one
    option NAME begins; None for a NAME that begins none (sbatch refuses it, or it is of a later Slurm). BadOption
    when NAME begins several (sbatch refuses it too)."""
    name = word[2:].partition("=")[0]
    known = [*SBATCH_NO_VALUE, *SBATCH_OPTIONAL_VALUE, *SBATCH_VALUE]
    if name in known:
        return name
    matches = sorted(option for option in known if option.startswith(name))
    if len(matches) > 1:
        raise BadOption(
            f"--slurm-args: {word!r} is ambiguous to sbatch (--{', --'.join(matches)}); give the option's full name"
        )
    return matches[0] if matches else None


def sbatch_options(word: str) -> tuple[list[str], bool]:
    """The sbatch options that a word starting with "-" sets (-Ha5: hold, array), and whether the next word is the
    value of the last (--comment -a5: the comment "-a5"). An option of letters stops at a letter sbatch does not know
    (it refuses the word) and at one that takes a value: the rest of the word is that value."""
    if word.startswith("--"):
        option = sbatch_long_option(word)
        return ([option] if option else []), option in SBATCH_VALUE and "=" not in word
    options = []
    for i, letter in enumerate(word[1:], start=1):
        option = SBATCH_LETTERS.get(letter)
        if option is None:
            break
        options.append(option)
        if option in SBATCH_VALUE or option in SBATCH_OPTIONAL_VALUE:
            return options, option in SBATCH_VALUE and i == len(word) - 1
    return options, False


# What goes into an #SBATCH line. bash reads the line as a comment, up to the newline, so a newline (or any control
# character) in it would start a shell command: refused. sbatch reads the rest with its own parser, not the shell's
# (_get_argument in Slurm's src/sbatch/opt.c): quotes group words, a backslash escapes the next character, an unquoted
# # starts a comment, a word may not start with ":", and an empty word ends the line. So a word with a space, a quote,
# a backslash or a #, or one that starts with ":", goes in double quotes, with " and \ escaped (sbatch_word); an empty
# word is refused; nothing else is special. (Slurm also blanks the word "packjob" anywhere in an #SBATCH line.)
def sbatch_word(word: str) -> str:
    """A word (without control characters) for an #SBATCH line, so that sbatch's parser reads it back as it is; an
    option's value quoted apart from its name: --comment="tiny sweep"."""
    name, eq, value = word.partition("=")
    if eq and name.startswith("-") and sbatch_word(name) == name:
        return f"{name}={sbatch_word(value)}"
    if word and not word.startswith(":") and not any(c.isspace() or c in "\"'\\#" for c in word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sbatch_lines(value: str) -> list[str]:
    """--slurm-args as #SBATCH lines, one option (with its value) a line: "-p gpu --gres=gpu:1" -> two lines.

    Split like a shell would (shlex: quotes group, and a newline between words is a space); a word that holds a
    control character, e.g. a quoted newline, is refused: it cannot go into an #SBATCH line."""
    try:
        words = shlex.split(value)
    except ValueError as e:
        raise BadOption(f"--slurm-args is not a valid shell word list ({e}): {value!r}") from None
    lines: list[list[str]] = []
    # the next word is the last option's value; the last option is none sbatch knows
    value_next = unknown = False
    for word in words:
        if control_characters(word) or not word:
            raise BadOption(
                f"--slurm-args: {word!r} is empty or holds a control character (a newline, a tab, ...), which "
                "cannot go into an #SBATCH line; give sbatch options of printable characters"
            )
        # its value, whatever it holds: --comment -a5
        if value_next or (unknown and not word.startswith("-")):
            lines[-1].append(word)
            value_next = False
        elif word.startswith("-") and word not in ("-", "--"):
            options, value_next = sbatch_options(word)
            for option in options:
                if option in SBATCH_OWN:
                    raise BadOption(
                        f"--slurm-args: {word!r} is sbatch's --{option}, which bench.sh sets itself "
                        f"({SBATCH_OWN[option]}); leave it out"
                    )
            lines.append([word])
            unknown = not options
        else:
            raise BadOption(
                f"--slurm-args must be sbatch options such as --partition=gpu, got {word!r}"
            )
    return [" ".join(map(sbatch_word, line)) for line in lines]

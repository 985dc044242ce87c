"""Options and argument types shared by the `azdl` subcommands, so every command spells and
checks them the same way (and new options inherit the checks).

Conventions: `-s/--stack` as in the Pulumi CLI, on every command that takes a stack (`plan`,
`diff` and `policy` take bare stack names as well); counts are whole numbers of at least 1; a job
name follows Azure ML's rule and is checked before Azure is contacted; arguments for the training
script come after `--` (`script_args`).
"""

import argparse
import re
from pathlib import Path

from azdl.errors import AzdlError
from azdl.launchers import LAUNCHERS, TRANSPORTS

# Azure ML job names are run ids: a letter or digit, then up to 255 letters, digits, `_` or `-`
# (azure-ai-ml 1.35, azure/ai/ml/_restclient/runhistory/operations/_runs_operations.py: runId
# pattern `^[a-zA-Z0-9][\w-]{0,255}$`; tests/docs/test_cli_conventions.py checks this against it).
JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,255}")


# Shell completion of a stack name: the stack files of the project the shell is in (the nearest
# folder up with a Pulumi.yaml, as azdl.project finds it), in its stacks/ folder or its own,
# listed when the user presses Tab, so a stack added later is offered too.
LIST_STACKS = (
    'd=$PWD; while [ "$d" != / ] && [ ! -f "$d/Pulumi.yaml" ]; do d=$(dirname "$d"); done;'
    ' ls -1 "$d/stacks" "$d" 2>/dev/null'
    " | sed -n 's/^Pulumi\\.\\(.*\\)\\.yaml$/\\1/p' | sort -u"
)


def completes_stacks(action: argparse.Action) -> argparse.Action:
    """`action` completed with the stack names (shtab's `cmd` completer; shtab is imported here:
    the training environment imports command modules without building their parsers)."""
    import shtab

    action.complete = shtab.cmd(LIST_STACKS)
    return action


def add_stack_options(p: argparse.ArgumentParser):
    """-s/--stack and --outputs (mutually exclusive); returns the group, for a command that
    offers one more way to name the target."""
    where = p.add_mutually_exclusive_group()
    completes_stacks(
        where.add_argument(
            "-s", "--stack", help="Pulumi stack to read outputs from (needs the Pulumi CLI)"
        )
    )
    where.add_argument(
        "--outputs",
        type=Path,
        metavar="FILE",
        help="saved `pulumi stack output --json --stack STACK` of the stack",
    )
    return where


def add_stacks_argument(p: argparse.ArgumentParser, metavar: str, what: str) -> None:
    """Stacks as bare arguments and as `-s/--stack` (repeatable), for commands that take
    several; `stacks_of` merges them (those given with -s first)."""
    completes_stacks(p.add_argument("stacks", nargs="*", metavar=metavar, help=what))
    completes_stacks(p.add_argument(
        "-s", "--stack", action="append", default=[], dest="stack", metavar="STACK",
        help="a stack, as in the Pulumi CLI (repeatable; the same as a bare STACK)",
    ))  # fmt: skip


def stacks_of(args: argparse.Namespace, metavar: str) -> list[str]:
    found = [*args.stack, *args.stacks]
    if not found:
        raise AzdlError(f"no stack given: name at least one {metavar} (or -s STACK)")
    return found


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (workers, nodes, files in flight...)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected at least 1")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: a whole number of 0 or more (retries, restarts)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of 0 or more")
    return int(text)


def job_name(text: str) -> str:
    """argparse type: an Azure ML job name (see JOB_NAME)."""
    if not JOB_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid Azure ML job name: it must start with a letter or digit "
            "and hold only letters, digits, '_' and '-', at most 256 characters"
        )
    return text


def add_job_name_option(p: argparse.ArgumentParser, default_words: str) -> None:
    p.add_argument(
        "--name",
        type=job_name,
        help=f"job name: letters, digits, '_' and '-', starting with a letter or digit "
        f"(default: {default_words})",
    )


# The launcher values of earlier releases (`gloo` and `mpi` named Horovod's transport), each with
# its spelling now: one vocabulary, horovod|torchrun, on every command (issue 33).
LOCAL_RENAMES = {
    "gloo": "--launcher horovod (horovodrun --gloo is its default --transport)",
    "mpi": "--launcher horovod --transport mpi",
}
CLUSTER_RENAMES = {"mpi": "--launcher horovod (Azure ML's MPI; the default)"}


def add_launcher_option(
    p: argparse.ArgumentParser, help: str, renamed: dict[str, str], transport: str | None = None
) -> None:
    """--launcher horovod|torchrun (a value of earlier releases gets one line naming its new
    spelling) and, with `transport` (its help), Horovod's --transport gloo|mpi."""

    def launcher(text: str) -> str:
        if text in renamed:
            raise argparse.ArgumentTypeError(
                f"{text!r} is no launcher any more: say {renamed[text]}"
            )
        return text

    p.add_argument("--launcher", type=launcher, choices=LAUNCHERS, help=help)
    if transport is not None:
        p.add_argument("--transport", choices=TRANSPORTS, help=transport)


SCRIPT_ARGS = "script_args"


def add_script_args(p: argparse.ArgumentParser) -> None:
    """The training script's own options, after `--` (see `azdl.suggest` for the hint when one
    is given before it)."""
    p.add_argument(
        SCRIPT_ARGS,
        nargs=argparse.REMAINDER,
        help="arguments for the training script, after `--`",
    )


def script_args(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args)

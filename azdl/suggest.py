"""What to say about arguments no azdl parser knows: the nearest azdl option ("did you mean
`--stack`?") or command or choice, and, for commands that run a training script, `--` only when
that script really takes the option (its own parser, `training.options`, is asked)."""

import argparse
import difflib
import re
import sys

from azdl.commands.options import SCRIPT_ARGS
from training.flavours import DEFAULT_FRAMEWORK

# argparse's message for a value outside `choices` (commands included); Python 3.11 quotes the
# choices, later releases may not.
INVALID_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)")


class Parser(argparse.ArgumentParser):
    """argparse, with the nearest choice suggested for an invalid one (`azdl plna`: did you mean
    plan?). Subcommand parsers are made of the same class.

    The help is written as any other output: argparse's own writer drops a failed write, which
    would end `azdl --help | head -1` with 0 instead of as a reader gone (azdl.cli.main)."""

    def print_help(self, file=None):
        (file or sys.stdout).write(self.format_help())

    def error(self, message):
        if found := INVALID_CHOICE.search(message):
            choices = [c.strip("'") for c in found["choices"].split(", ")]
            if near := difflib.get_close_matches(found["value"], choices, n=1, cutoff=0.6):
                message += f"; did you mean {near[0]}?"
        super().error(message)


def options_of(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--")]


def nearest(word: str, options: list[str]) -> str | None:
    """The option closest to `word` (its name before any `=VALUE`), if one is close enough."""
    name = word.split("=", 1)[0]
    found = difflib.get_close_matches(name, options, n=1, cutoff=0.75)
    return found[0] if found else None


def script_option(args: argparse.Namespace, option: str) -> str | None:
    """The option of the built-in training script the command would run that `option` names
    (itself, else the nearest); None when it has none, or for the user's own script."""
    if getattr(args, "script", None) is not None:
        return None
    from training.options import build_parser  # the scripts' own parser; no TensorFlow import

    framework = getattr(args, "framework", None) or DEFAULT_FRAMEWORK
    theirs = options_of(build_parser(framework))
    name = option.split("=", 1)[0]
    return name if name in theirs else nearest(name, theirs)


def unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]):
    """The one-line error for `extra`, the words `parser` (a command's) did not take."""
    message = f"unrecognized arguments: {' '.join(extra)}"
    option = next((word for word in extra if word.startswith("-")), None)
    if option is None:
        return message
    hints = []
    if own := nearest(option, options_of(parser)):
        hints.append(f"did you mean {own}?")
    if any(a.dest == SCRIPT_ARGS for a in parser._actions):
        theirs = script_option(args, option)
        if getattr(args, "script", None) is not None:
            where = f"{parser.prog} [options] -- {option} …"
            hints.append(f"if your script takes {option}, it goes after `--`: {where}")
        elif theirs is not None:
            hints.append(
                f"the training script has {theirs}: options for the training script go after "
                f"`--`: {parser.prog} [options] -- {theirs} …"
            )
    return "; ".join([message, *hints])

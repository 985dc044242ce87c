"""`azdl`: the one command-line entry point for operators.

Each subcommand lives in its own module under `azdl.commands` and exposes
`register(subparsers)`, which adds its parser and sets `func` to the function that runs it.
Shared options and argument types are in `azdl.commands.options`. Every bad input ends in one
`error: …` line (exit 2), never a traceback.
"""

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

from azdl.commands import bench, cluster, data, estimate, jobs, plan, policy, submit, train
from azdl.commands import diff as diff_command
from azdl.errors import AzdlError
from infra.config import ConfigError

COMMANDS = [train, data, plan, diff_command, policy, submit, bench, estimate, jobs, cluster]


def package_version() -> str:
    try:
        return version("azdl")
    except PackageNotFoundError:  # run from a checkout that is not pip-installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="azdl",
        description="Stand up and run distributed Horovod training on Azure: "
        "infrastructure plans, data, local and cluster training, benchmarks.",
    )
    parser.add_argument("--version", action="version", version=f"azdl {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, except that options meant for the training script but given before `--`
    get a hint saying where they belong."""
    args, extra = parser.parse_known_args(argv)
    sub = getattr(args, "script_args_parser", None)  # set by options.add_script_args
    misplaced = [word for word in extra if word.startswith("-")]
    if sub is not None and misplaced:
        sub.error(
            f"{', '.join(misplaced)}: not an option of `{sub.prog}`. Options for the training "
            f"script go after `--`: {sub.prog} [{sub.prog} options] -- {' '.join(misplaced)} … "
            "(`azdl train -- --help` lists them)"
        )
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    try:
        return int(args.func(args) or 0)
    except (AzdlError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:  # a binary file where text was expected
        print(f"error: a file given is not UTF-8 text ({exc.reason} at byte {exc.start})",
              file=sys.stderr)  # fmt: skip
        return 2
    except OSError as exc:  # unreadable or unwritable files the user named
        print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

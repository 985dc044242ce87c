"""`azdl`: the one command-line entry point for operators. Each module of `azdl.commands` has
`register(subparsers)`; this is the one module that imports them. Every bad input ends in one
`error: …` line with the exit code of `azdl.errors`; bare `azdl` prints the help."""

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

import shtab
from azure.core.exceptions import ServiceRequestError

from azdl import console, suggest
from azdl.commands import bench, cluster, data, estimate, jobs, plan, policy, submit, train
from azdl.commands import diff as diff_command
from azdl.errors import AzdlError, Unreachable
from infra.config import ConfigError

COMMANDS = [train, data, plan, diff_command, policy, submit, bench, estimate, jobs, cluster]


def package_version() -> str:
    try:
        return version("azdl")
    except PackageNotFoundError:  # run from a checkout that is not pip-installed
        return "unknown (not installed)"


def leaf_parsers(parser: argparse.ArgumentParser):
    """Every parser that runs a command (those without subcommands of their own)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for action in subs:
        for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
            yield from leaf_parsers(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = suggest.Parser(
        prog="azdl",
        description="Stand up and run distributed Horovod training on Azure: "
        "infrastructure plans, data, local and cluster training, benchmarks.",
    )
    parser.add_argument("--version", action="version", version=f"azdl {package_version()}")
    no_color = "no colour in the output (as does a non-empty NO_COLOR)"
    parser.add_argument("--no-color", action="store_true", help=no_color)
    # `eval "$(azdl --print-completion bash)"`: the script is generated from these parsers.
    shtab.add_argument_to(parser, ["--print-completion"], help="print a shell completion script")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    for leaf in leaf_parsers(parser):
        # Also after the command (`azdl plan dev --no-color`); SUPPRESS keeps a top-level one.
        leaf.add_argument(
            "--no-color", action="store_true", default=argparse.SUPPRESS, help=no_color
        )
        leaf.set_defaults(command_parser=leaf)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, except that an unknown option gets the nearest azdl option as a suggestion,
    and a training option given before `--` is pointed there."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        args.command_parser.error(suggest.unrecognized(args.command_parser, args, extra))
    return args


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        parser.print_help()
        return 0
    args = parse(parser, argv)
    if args.no_color:
        console.disable_color()
    try:
        return int(args.func(args) or 0)
    except (AzdlError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except ServiceRequestError as exc:  # azure-core's "no answer" after its retries
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"error: cannot reach an Azure endpoint: {line}", file=sys.stderr)
        return Unreachable.exit_code
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

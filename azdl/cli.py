"""`azdl`: the one command-line entry point for operators.

Each subcommand lives in its own module under `azdl.commands` and exposes
`register(subparsers)`, which adds its parser and sets `func` to the function that runs it.
"""

import argparse
import sys

from azdl.commands import bench, data, plan, policy, submit, train
from azdl.commands import diff as diff_command
from azdl.errors import AzdlError

COMMANDS = [train, data, plan, diff_command, policy, submit, bench]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="azdl",
        description="Stand up and run distributed Horovod training on Azure: "
        "infrastructure plans, data, local and cluster training, benchmarks.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except AzdlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

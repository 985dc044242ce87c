"""`azdl`: the one command-line entry point for operators. Each module of `azdl.commands` has
`register(subparsers)`; this is the one module that imports them. Every bad input ends in one
`error: …` line with the exit code of `azdl.errors`; bare `azdl` prints the help; a reader that
stops early ends the command quietly (`azdl.console.READER_GONE`).

Starting is cheap: a command module imports at its top only what its parser needs, and the
libraries its work needs (Pulumi, azure-ai-ml, the storage SDK, matplotlib, rich, pydantic) in
the function that does the work, so `azdl --help` and the refusal of bad input load none of
them (tests/test_cli_startup.py holds this)."""

import argparse
import io
import os
import sys
from importlib.metadata import PackageNotFoundError, version

import shtab

from azdl import console, project, suggest
from azdl.commands import (
    bench,
    cluster,
    data,
    estimate,
    init,
    jobs,
    plan,
    policy,
    setup_training,
    submit,
    train,
)
from azdl.commands import diff as diff_command
from azdl.errors import AzdlError, Unreachable

COMMANDS = [
    init,
    setup_training,
    train,
    data,
    plan,
    diff_command,
    policy,
    submit,
    bench,
    estimate,
    jobs,
    cluster,
]


def package_version() -> str:
    try:
        return version("azdl")
    except PackageNotFoundError:  # run from a checkout that is not pip-installed
        return "unknown (not installed)"


class VersionAction(argparse.Action):
    """argparse's `version` action, with the version looked up only when asked for (reading the
    installed packages' metadata is most of the cost of building the parser otherwise)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"azdl {package_version()}")
        parser.exit()


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
        description="Stand up and run distributed training on Azure (Horovod or torchrun): "
        "infrastructure plans, data, local and cluster training, benchmarks.",
    )
    parser.add_argument(
        "--version", action=VersionAction, help="show the installed version and exit"
    )
    no_color = "no colour in the output (as does a non-empty NO_COLOR)"
    parser.add_argument("--no-color", action="store_true", help=no_color)
    parser.add_argument(
        "--project-dir",
        metavar="DIR",
        help="the project (a folder with Pulumi.yaml: its stacks, runs/ and out/); "
        "default: the nearest one up from the current folder",
    )
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


def loaded(module: str, name: str) -> tuple[type[BaseException], ...]:
    """The exception class `module.name`, if that module has been imported: one that never was
    cannot have raised, so the CLI catches its errors without importing it."""
    found = sys.modules.get(module)
    return (getattr(found, name),) if found is not None else ()


def main(argv: list[str] | None = None) -> int:
    try:
        return flushed(argv)
    except BrokenPipeError:  # the reader of the output went away (`| head`): end quietly
        return reader_gone()


def reader_gone() -> int:
    """Python's recipe (docs.python.org/3/library/signal.html, "Note on SIGPIPE"): stdout goes
    to /dev/null, so that the interpreter's last flush of what is still buffered cannot fail
    and print a traceback of its own."""
    try:
        stdout = sys.stdout.fileno()
    except io.UnsupportedOperation:  # stdout replaced by an in-memory stream (in-process use)
        return console.READER_GONE
    os.dup2(os.open(os.devnull, os.O_WRONLY), stdout)
    return console.READER_GONE


def flushed(argv: list[str] | None) -> int:
    """`run`, with stdout flushed before returning, so that a closed pipe fails here rather
    than in the interpreter's flush at exit; argparse's own exits (--help, --version,
    --print-completion, a usage error) too."""
    try:
        code = run(argv)
    except SystemExit:
        sys.stdout.flush()
        raise
    sys.stdout.flush()
    return code


def run(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        parser.print_help()
        return 0
    args = parse(parser, argv)
    if args.no_color:
        console.disable_color()
    try:
        project.choose(args.project_dir)
        return int(args.func(args) or 0)
    except (AzdlError, *loaded("infra.config", "ConfigError")) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except loaded("azure.core.exceptions", "ServiceRequestError") as exc:
        # azure-core's "no answer" after its retries
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"error: cannot reach an Azure endpoint: {line}", file=sys.stderr)
        return Unreachable.exit_code
    except UnicodeDecodeError as exc:  # a binary file where text was expected
        print(f"error: a file given is not UTF-8 text ({exc.reason} at byte {exc.start})",
              file=sys.stderr)  # fmt: skip
        return 2
    except BrokenPipeError:
        raise  # not a file the user named: the reader of the output went away (`main`)
    except OSError as exc:  # unreadable or unwritable files the user named
        print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

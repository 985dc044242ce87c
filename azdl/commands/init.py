"""`azdl init DIR`: a team's platform repository, with azdl pinned (azdl.scaffold)."""

import argparse
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "init",
        help="make a team's platform repository that takes azdl as a pinned dependency",
        description="Write a new Pulumi project into DIR (new or empty): Pulumi.yaml, a "
        "__main__.py that builds azdl's platform from the stack's settings with a place for "
        "your own resources, stacks/Pulumi.dev.yaml and Pulumi.prod.yaml, a requirements.txt "
        "that pins this azdl, .gitignore, .amlignore and a README with the next commands.",
    )
    p.add_argument("dir", metavar="DIR", type=Path, help="the repository's folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from azdl.scaffold import create

    written = create(args.dir)
    for path in written:
        print(path)
    print(f"next: cd {args.dir} and follow README.md")
    return 0

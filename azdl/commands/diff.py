"""`azdl diff`: compare two plans (manifests or stacks) for review; the exit code says whether
a reviewer's attention is needed."""

import argparse
import json

from azdl.errors import AzdlError
from azdl.review.diff import EXIT_CODES, diff, render_text
from azdl.review.plan import load_plans


def register(subparsers) -> None:
    codes = "; ".join(f"{k}: {v}" for k, v in EXIT_CODES.items())
    p = subparsers.add_parser(
        "diff",
        help="compare two plans: added, removed, changed; replacements and security flagged",
        description="Compare two plans, each a manifest file (from `azdl plan`) or a stack "
        f"name (rendered now). Exit codes: {codes}.",
    )
    p.add_argument("base", help="the base plan: a manifest .json or a stack name")
    p.add_argument(
        "head", nargs="?", help="the plan under review: a manifest .json or a stack name"
    )
    p.add_argument("-s", "--stack", help="the stack under review, rendered now (instead of HEAD)")
    p.add_argument("--json", action="store_true", help="print the diff as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.head is None) == (args.stack is None):
        raise AzdlError("give the plan under review once: HEAD or -s STACK")
    result = diff(*load_plans([args.base, args.head or args.stack]))
    if args.json:
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        print(render_text(result), end="")
    return result.exit_code

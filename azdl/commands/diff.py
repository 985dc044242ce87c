"""`azdl diff`: compare two plans (manifests or stacks) for review; the exit code says whether
a reviewer's attention is needed. A stack's plan is reused when nothing it was rendered from has
changed (azdl.review.render_cache)."""

import argparse

from azdl.commands.options import completes_stacks
from azdl.console import print_json
from azdl.errors import AzdlError
from azdl.review.diff import EXIT_CODES

JSON_SCHEMA = "azdl.diff-result/v1"


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
    under_review = "the stack under review, rendered now (instead of HEAD)"
    completes_stacks(p.add_argument("-s", "--stack", help=under_review))
    p.add_argument(
        "--json",
        action="store_true",
        help=f"print the diff as one JSON document ({JSON_SCHEMA}); stable for scripts",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from azdl.review.diff import diff, render_text
    from azdl.review.plan import load_plans

    if (args.head is None) == (args.stack is None):
        raise AzdlError("give the plan under review once: HEAD or -s STACK")
    result = diff(*load_plans([args.base, args.head or args.stack]))
    if args.json:
        print_json(JSON_SCHEMA, result.to_json())
    else:
        print(render_text(result), end="")
    return result.exit_code

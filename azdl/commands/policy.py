"""`azdl policy`: run the CrossGuard policy pack (policies/) offline against plans."""

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from azdl.review.plan import load_plans


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "policy",
        help="check plans against the policy pack offline (exit 1 on a mandatory violation)",
        description="Run the policies of policies/ (the pack `pulumi preview --policy-pack "
        "policies` uses) against plans: manifest files or stack names. Exit 0: no mandatory "
        "violation; 1: at least one; 2: bad input.",
    )
    p.add_argument("plans", nargs="+", metavar="PLAN", help="manifest .json or stack name")
    p.add_argument(
        "--pack-config",
        action="store_true",
        help="print the --policy-pack-config JSON for `pulumi preview` instead (the budget)",
    )
    p.add_argument("--list", action="store_true", help="list the policies, then check")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # pulumi-policy pulls in gRPC: imported here, not on every `azdl` start.
    from azdl.review.policy import check, load_rules, policy_config

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    if args.list:
        table = Table(title="Policies (policies/azdl_rules.py)", title_justify="left")
        for column in ("policy", "severity", "enforcement", "remediation"):
            table.add_column(column)
        for p in load_rules().POLICIES:
            table.add_row(p.name, p.severity.value, p.enforcement_level.value, p.remediation_steps)
        console.print(table)
    failed = False
    for doc in load_plans(args.plans):
        if args.pack_config:
            print(json.dumps(policy_config(doc), indent=2, sort_keys=True))
            continue
        findings = check(doc)
        mandatory = [f for f in findings if f.mandatory]
        failed = failed or bool(mandatory)
        if not findings:
            console.print(f"stack {doc['stack']}: all {len(load_rules().POLICIES)} policies pass")
            continue
        table = Table(
            title=f"stack {doc['stack']}: {len(findings)} violations", title_justify="left"
        )
        for column in ("policy", "severity", "level", "resource", "message"):
            table.add_column(column, overflow="fold")
        for f in findings:
            level = "mandatory" if f.mandatory else "advisory"
            table.add_row(f.policy, f.severity, level, f.resource or "(stack)", f.message)
        console.print(table)
    return 1 if failed else 0

"""`azdl policy`: run the CrossGuard policy pack (policies/) offline against plans."""

import argparse
import json

from rich.table import Table

from azdl.commands.options import add_stacks_argument, stacks_of
from azdl.console import make_console, print_json
from azdl.errors import AzdlError
from azdl.review.plan import load_plans

JSON_SCHEMA = "azdl.policy-result/v1"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "policy",
        help="check plans against the policy pack offline (exit 1 on a mandatory violation)",
        description="Run the policies of policies/ (the pack `pulumi preview --policy-pack "
        "policies` uses) against plans: manifest files or stack names. Exit 0: no mandatory "
        "violation; 1: at least one; 2: bad input.",
    )
    add_stacks_argument(p, "PLAN", "manifest .json or stack name")
    p.add_argument(
        "--json",
        action="store_true",
        help=f"print the violations as one JSON document ({JSON_SCHEMA}); stable for scripts",
    )
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

    plans = stacks_of(args, "PLAN")
    if args.json and (args.list or args.pack_config):
        raise AzdlError("--json prints the violations; leave out --list and --pack-config")
    console = make_console()
    if args.list:
        table = Table(title="Policies (policies/rules/)", title_justify="left")
        for column in ("policy", "severity", "enforcement", "remediation"):
            table.add_column(column, overflow="fold")
        for p in load_rules().POLICIES:
            table.add_row(p.name, p.severity.value, p.enforcement_level.value, p.remediation_steps)
        console.print(table)
    failed, results = False, []
    for doc in load_plans(plans):
        if args.pack_config:
            print(json.dumps(policy_config(doc), indent=2, sort_keys=True))
            continue
        findings = check(doc)
        mandatory = [f for f in findings if f.mandatory]
        failed = failed or bool(mandatory)
        if args.json:
            results.append({"stack": doc["stack"], "passed": not mandatory, "violations": [
                {"policy": f.policy, "severity": f.severity, "mandatory": f.mandatory,
                 "resource": f.resource, "message": f.message}
                for f in findings
            ]})  # fmt: skip
            continue
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
    if args.json:
        print_json(JSON_SCHEMA, {"passed": not failed, "stacks": results})
    return 1 if failed else 0

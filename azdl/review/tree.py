"""A plan as a resource tree, laid out like `pulumi preview`'s (type, name, options)."""

from typing import Any


def render_tree(doc: dict[str, Any]) -> str:
    resources = doc["resources"]
    children: dict[str | None, list[dict[str, Any]]] = {}
    for res in resources:
        children.setdefault(res.get("parent"), []).append(res)
    rows: list[tuple[str, str, str]] = [
        ("pulumi:pulumi:Stack", f"{doc['project']}-{doc['stack']}", "")
    ]

    def walk(parent: str | None, prefix: str) -> None:
        kids = children.get(parent, [])
        for i, res in enumerate(kids):
            last = i == len(kids) - 1
            flags = [f for f in ("protect", "retainOnDelete") if res.get(f)]
            rows.append((f"{prefix}{'└─ ' if last else '├─ '}{res['type']}", res["name"],
                         " ".join(f"[{f}]" for f in flags)))  # fmt: skip
            walk(res["key"], prefix + ("   " if last else "│  "))

    walk(None, "")
    custom = sum(1 for r in resources if r.get("custom"))
    width_type = max(len(r[0]) for r in rows) + 2
    width_name = max(len(r[1]) for r in rows) + 2
    header = (
        f"Plan of stack {doc['stack']} (offline, no cloud access): {custom} resources to "
        f"create in {len(resources) - custom} components (`pulumi up` reports "
        f"`+ {pulumi_count(doc)} created`: it counts the stack and the components too)"
    )
    lines = [header, "", f"  {'Type':<{width_type}}{'Name':<{width_name}}Options"]
    lines += [f"+ {t:<{width_type}}{n:<{width_name}}{o}".rstrip() for t, n, o in rows]
    return "\n".join(lines) + "\n"


def pulumi_count(doc: dict[str, Any]) -> int:
    """What `pulumi up` reports as `Resources: + N created` for this plan on a new stack: every
    registered resource, components and the root `pulumi:pulumi:Stack` included, default providers
    left out (pulumi/pulumi pkg/engine/deployment.go: `isDefaultProviderStep` steps are not
    reported in the summary; read 2026-11-24)."""
    return len(doc["resources"]) + 1

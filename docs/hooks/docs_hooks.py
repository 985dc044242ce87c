"""MkDocs hook: the parts of the docs that code already knows are generated at build time.

A page asks for one with a marker line `<!-- azdl:generate NAME -->`; NAME is one of GENERATORS
below. An unknown NAME fails the build. Everything runs offline: the stacks are rendered by the
real program under the Pulumi SDK's mocks (`azdl.review.plan.render_stack`), or read from
$AZDL_DOCS_PLANS/<stack>.json when a caller (the test suite) has rendered them already.

What the page's prose says a generated block shows is written on its marker too, and checked
when the block is generated: `expect="LINE"` (a line of the block; `…` stands for any text) and
`absent="TEXT"` (in no line of it). A claim that no longer holds fails the build.
"""

import io
import json
import os
import re
import sys
from collections import Counter
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# private_surfaces is beside this file: mkdocs puts the hook's folder on the path to load it.
import private_surfaces  # noqa: E402
from mkdocs.exceptions import PluginError  # noqa: E402

STACKS = ("dev", "prod")
# A marker may be indented (inside an admonition or a list): the output gets the same indent.
MARKER = re.compile(
    r"^( *)<!-- azdl:generate ([\w-]+)((?: (?:expect|absent)=\"[^\"]*\")*) -->$", re.M
)
CLAIM = re.compile(r'(expect|absent)="([^"]*)"')


@cache
def plans() -> dict[str, dict]:
    given = os.environ.get("AZDL_DOCS_PLANS")
    if given:
        return {s: json.loads((Path(given) / f"{s}.json").read_text()) for s in STACKS}
    from azdl.review.plan import render_stack

    return {stack: render_stack(stack)[0] for stack in STACKS}


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _value(value) -> str:
    from azdl.review import manifest

    if manifest.is_unknown(value):
        return "*known after deploy*"
    if value is None:
        return "null"
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def config_reference() -> str:
    from infra.config_schema import reference_rows

    rows, example = [], []
    for key in reference_rows():
        depth = key.path.count(".")
        name = f"`azdl:{key.path}`" if depth == 0 else f"&nbsp;&nbsp;`{key.path}`"
        rows.append(f"| {name} | {key.type} | {_cell(key.default)} | {_cell(key.allowed)} | "
                    f"{_cell(key.doc)} |")  # fmt: skip
        value, path = key.example, key.path.replace("[]", "[0]")  # a list item's: the first
        if key.type == "dict" and depth == 0 and key.path != "tags":
            continue  # sections: their sub-keys get the lines
        if value is None:
            continue
        if isinstance(value, dict):
            for sub, item in value.items():
                example.append(f"pulumi config set --path 'azdl:{path}.{sub}' {item}")
        elif isinstance(value, list):
            for i, item in enumerate(value or ["…"]):
                example.append(f"pulumi config set --path 'azdl:{path}[{i}]' {item}")
        elif depth == 0:
            text = value if isinstance(value, str) else json.dumps(value)
            example.append(f"pulumi config set azdl:{path} {text}")
        else:
            text = json.dumps(value) if not isinstance(value, str) else value
            example.append(f"pulumi config set --path 'azdl:{path}' {text}")
    table = ["| key | type | default | allowed | what it does |", "| --- | --- | --- | --- | --- |"]
    return "\n".join([
        *table, *rows, "",
        "Every key, set from the command line (structured keys with `--path`; the values are the "
        "defaults or examples):", "", "```bash", *example, "```",
    ])  # fmt: skip


def stack_outputs() -> str:
    from infra.exports import DESCRIPTIONS  # what each output holds, declared with its key

    docs = plans()
    keys = sorted(set(docs["dev"]["outputs"]) | set(docs["prod"]["outputs"]))
    undeclared = [k for k in keys if k not in DESCRIPTIONS]
    if undeclared:
        raise PluginError(f"the plans export {undeclared}, which infra/exports.py does not declare")
    lines = ["| output | what it holds | dev (offline render) | prod (offline render) |",
             "| --- | --- | --- | --- |"]  # fmt: skip
    for key in keys:
        dev, prod = (_value(docs[s]["outputs"].get(key)) for s in STACKS)
        lines.append(f"| `{key}` | {_cell(DESCRIPTIONS[key])} | {_cell(dev)} | {_cell(prod)} |")
    return "\n".join(lines)


def resource_counts() -> str:
    docs = plans()
    counts = {s: Counter(r["type"] for r in docs[s]["resources"] if r["custom"]) for s in STACKS}
    types = sorted(set(counts["dev"]) | set(counts["prod"]))
    lines = ["| resource type | dev | prod |", "| --- | ---: | ---: |"]
    for kind in types:
        lines.append(f"| `{kind}` | {counts['dev'][kind] or '–'} | {counts['prod'][kind] or '–'} |")
    lines.append(f"| **total** | **{sum(counts['dev'].values())}** | "
                 f"**{sum(counts['prod'].values())}** |")  # fmt: skip
    return "\n".join(lines)


def plan_tree() -> str:
    from azdl.review.tree import render_tree

    return f"```text\n$ azdl plan dev\n{render_tree(plans()['dev'])}```"


def _diff(base: str, head: str, head_lines: int | None = None) -> str:
    from azdl.review.diff import diff, render_text

    text = render_text(diff(plans()[base], plans()[head]))
    if head_lines:
        text = "\n".join(text.splitlines()[:head_lines]) + "\n…\n"
    return f"```diff\n$ azdl diff {base} {head}\n{text}```"


def diff_dev_prod() -> str:
    return _diff("dev", "prod")


def diff_prod_dev_head() -> str:
    return _diff("prod", "dev", head_lines=16)


def cost_tables() -> str:
    from rich.console import Console

    from azdl.review import cost
    from azdl.review.cost_table import print_cost

    blocks = []
    for stack in STACKS:
        out = io.StringIO()
        print_cost(Console(file=out, width=130, highlight=False), cost.estimate(plans()[stack]))
        blocks.append(f"```text\n$ azdl plan {stack} --no-tree\n{out.getvalue()}```")
    return "\n\n".join(blocks)


def policies_table() -> str:
    from azdl.review.policy import load_rules

    lines = ["| policy | enforcement | what it checks |", "| --- | --- | --- |"]
    for policy in load_rules().POLICIES:
        level = getattr(policy.enforcement_level, "value", policy.enforcement_level)
        lines.append(f"| `{policy.name}` | {level} | {_cell(policy.description)} |")
    return "\n".join(lines)


def benchmark_targets() -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import targets

    return targets.table(links=False)


def benchmark_code() -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import provenance

    return provenance.table(ROOT / "benchmarks" / "results")


def _parsers(parser, prog="azdl"):
    yield prog, parser
    subparsers = parser._subparsers._group_actions if parser._subparsers else ()
    for action in subparsers:
        for name, sub in action.choices.items():
            yield from _parsers(sub, f"{prog} {name}")


def cli_reference() -> str:
    from azdl.cli import build_parser

    parts = []
    for prog, parser in _parsers(build_parser()):
        level = "#" * min(2 + prog.count(" ") - 1, 4) if prog != "azdl" else "##"
        parts.append(f"{level} `{prog}`\n\n```text\n{parser.format_help()}```")
    return "\n\n".join(parts)


def cli_commands() -> list[str]:
    """Every `azdl …` command, for the tests."""
    from azdl.cli import build_parser

    return [prog for prog, _ in _parsers(build_parser())]


# The estimate the docs show: the prod stack, a 12-hour deadline, and every `azdl bench` results
# file kept in benchmarks/results (bench-*.json, copied there from a cluster run's results.json).
ESTIMATE_ARGS = ("-s", "prod", "--deadline", "12h")
BENCH_RESULTS = "bench-*.json"


@cache
def estimate_prod() -> tuple[dict, bytes, list[str]]:
    """(the JSON document, the PNG plot, the results files used) of ESTIMATE_ARGS."""
    import contextlib
    import tempfile

    from azdl.cli import main

    benches = sorted((ROOT / "benchmarks" / "results").glob(BENCH_RESULTS))
    args = [*ESTIMATE_ARGS, *(a for b in benches for a in ("--bench", str(b.relative_to(ROOT))))]
    with tempfile.TemporaryDirectory() as tmp:
        plot = Path(tmp) / "estimate.png"
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["estimate", *args, "--json", "--plot", str(plot)])
        if code != 0:
            raise PluginError(f"azdl estimate {' '.join(args)} exited {code}")
        return json.loads(printed.getvalue()), plot.read_bytes(), [str(b.relative_to(ROOT))
                                                                    for b in benches]  # fmt: skip


def estimate_example() -> str:
    doc, _, benches = estimate_prod()
    rec = doc["recommendation"]
    used = (
        ", ".join(f"`{b}`" for b in benches)
        if benches
        else f"none yet (no `benchmarks/results/{BENCH_RESULTS}`)"
    )
    lines = [
        f"`azdl estimate {' '.join(ESTIMATE_ARGS)}`; `azdl bench` results files used: {used}.",
        "",
        "| | size | nodes | priority | images/s | hours | USD | "
        f"within {doc['deadlineHours']:g} h | cores | throughput |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    shown = [o for o in doc["options"] if not o["excluded"]]
    for o in sorted(shown, key=lambda o: o["hours"]):
        key = (o["vmSize"], o["nodes"], o["priority"])
        chosen = rec is not None and key == (rec["vmSize"], rec["nodes"], rec["priority"])
        mark = "→" if chosen else ("*" if o["frontier"] else "")
        lines.append(
            f"| {mark} | {o['vmSize']} | {o['nodes']} | {o['priority']} | "
            f"{o['imagesPerSec']:,.0f} | {o['hours']:.2f} | {o['costUsd']:,.0f} | "
            f"{'yes' if o['hours'] <= doc['deadlineHours'] else 'no'} | {o['coresNeeded']} | "
            f"{_cell(o['throughputSummary'])} |"
        )
    if rec:
        lines += ["", f"Recommendation: {rec['nodes']} × {rec['vmSize']} ({rec['priority']}), "
                  f"{rec['hours']:.2f} h, {rec['costUsd']:,.0f} USD (estimate)."]  # fmt: skip
    lines += ["", "Sources, as the command prints them:", ""]
    lines += [f"- {_cell(line)}" for line in doc["sources"]]
    lines += ["", "![Cost against time of the prod options](estimate/prod.png)"]
    return "\n".join(lines)


def published_rates() -> str:
    from azdl.estimate.throughput import read_published

    lines = [
        "| VM size | GPUs | images/s | kind | precision | batch/GPU | system | source |",
        "| --- | ---: | ---: | --- | --- | ---: | --- | --- |",
    ]
    for size, rows in read_published().items():
        for r in rows:
            lines.append(
                f"| {size} | {r['gpus']} | {r['images_per_sec']:,} | {r['kind']} | "
                f"{r['precision']} | {r['batch_per_gpu']} | {_cell(r['system'])} | "
                f"{_cell(r['source'])} |"
            )
    return "\n".join(lines)


def nccl_baselines() -> str:
    from infra.nccl_baselines import NCCL_BASELINES

    lines = ["| VM size | scope | bus bandwidth (GB/s) | source |", "| --- | --- | ---: | --- |"]
    for name, base in NCCL_BASELINES.items():
        for scope, level in (("single node", base.single_node), ("multi-node", base.multi_node)):
            if level is not None:
                lines.append(
                    f"| {name} | {scope} | {level.expected_gbps:g} | {_cell(level.source)} |"
                )
    return "\n".join(lines)


FAULT_MATRIX = ROOT / "tests" / "jobs" / "fault_matrix" / "results.json"


def fault_matrix() -> str:
    """The fault matrix's table, from the results file its test run wrote."""
    results = json.loads(FAULT_MATRIX.read_text())
    lines = [
        f"Run on {results['date']} ({results['machine']}), commit {results['commit']}: "
        f"`{results['command']}`",
        "",
        "| fault | launcher | job status | retried | reason | seconds to the verdict |",
        "| --- | --- | --- | --- | --- | ---: |",
    ]
    for r in results["rows"]:
        seconds = "" if r["seconds"] is None else f"{r['seconds']:g}"
        retried = "yes" if r["retry"] else "no"
        lines.append(f"| {_cell(r['fault'])} | {r['launcher']} | {r['status']} | {retried} | "
                     f"{_cell(r['reason'])} | {seconds} |")  # fmt: skip
    return "\n".join(lines)


GENERATORS = {
    "config-reference": config_reference,
    "stack-outputs": stack_outputs,
    "resource-counts": resource_counts,
    "plan-tree": plan_tree,
    "diff-dev-prod": diff_dev_prod,
    "diff-prod-dev-head": diff_prod_dev_head,
    "cost-tables": cost_tables,
    "policies": policies_table,
    "cli-reference": cli_reference,
    "estimate-example": estimate_example,
    "published-rates": published_rates,
    "nccl-baselines": nccl_baselines,
    "benchmark-targets": benchmark_targets,
    "benchmark-code": benchmark_code,
    "private-sdk-surfaces": private_surfaces.markdown,
    "fault-matrix": fault_matrix,
}


def on_config(config):
    # argparse help and rich tables: the same width on every machine. Set for the build
    # process only (tests import this module, and must keep their own environment).
    os.environ["COLUMNS"] = "100"
    return config


def on_files(files, config):
    """The benchmark charts (benchmarks/results/*.png) become docs files `results/<name>.png`, so
    pages link them like any image and a missing chart is a broken link; the estimate's plot is
    drawn now, from the same run as its table (`estimate/prod.png`)."""
    from mkdocs.structure.files import File

    for chart in sorted((ROOT / "benchmarks" / "results").glob("*.png")):
        files.append(File.generated(config, f"results/{chart.name}", abs_src_path=str(chart)))
    files.append(File.generated(config, "estimate/prod.png", content=estimate_prod()[1]))
    return files


def missing_lines(expected: list[str], actual: str) -> list[str]:
    """Expected lines not found in `actual`, in order (`…` matches any text)."""
    lines = [line.rstrip() for line in actual.splitlines()]
    at, missing = 0, []
    for want in (w.rstrip() for w in expected):
        if not want:
            continue
        pattern = re.compile(".*?".join(re.escape(part) for part in want.split("…")))
        for j in range(at, len(lines)):
            if pattern.fullmatch(lines[j]):
                at = j + 1
                break
        else:
            missing.append(want)
    return missing


def false_claims(claims: str, text: str) -> list[str]:
    """The claims of a marker (its `expect=` and `absent=`) that `text` does not bear out."""
    found = CLAIM.findall(claims)
    wrong = [f'expect="{line}"' for line in missing_lines([v for k, v in found if k == "expect"],
                                                          text)]  # fmt: skip
    wrong += [f'absent="{v}"' for k, v in found if k == "absent" and v in text]
    return wrong


def on_page_markdown(markdown: str, page, config, files) -> str:
    def generate(match: re.Match) -> str:
        indent, name, claims = match.group(1), match.group(2), match.group(3)
        if name not in GENERATORS:
            raise PluginError(f"{page.file.src_path}: no generator {name!r}; known: "
                              f"{', '.join(GENERATORS)}")  # fmt: skip
        text = GENERATORS[name]()
        if wrong := false_claims(claims, text):
            raise PluginError(f"{page.file.src_path}: the prose says {name} shows what it does "
                              f"not: {'; '.join(wrong)}")  # fmt: skip
        return "\n".join(indent + line if line else line for line in text.splitlines())

    return MARKER.sub(generate, markdown)

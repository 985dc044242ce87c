"""What `azdl plan` and `azdl policy` print: `--json` for scripts (cost and violations), the
warning over `maxGpuSpendPerHourUsd`, colour only when wanted, and tables that are never cut
at an assumed width when piped. The stacks are the shipped ones, rendered once per session."""

import copy
import json
import re

import pytest

from azdl.cli import main
from azdl.review import cost
from azdl.review.prices import load_prices
from infra.azure_facts import ML_COMPUTE
from infra.config import load_config
from infra.way_in import missing_ways_in

SGR = re.compile(r"\x1b\[([0-9;]*)m")


def coloured(text: str) -> bool:
    """Whether `text` sets a colour (SGR 30-49, 90-107); bold and italic are not colours
    (no-color.org)."""
    codes = {int(c) for params in SGR.findall(text) for c in params.split(";") if c}
    return any(30 <= c <= 49 or 90 <= c <= 107 for c in codes)


@pytest.fixture
def rendered(shipped_plans, mocker):
    """`azdl plan`/`azdl policy` see the shipped plans (a deep copy each, to change)."""
    docs = {name: copy.deepcopy(doc) for name, doc in shipped_plans.items()}
    mocker.patch("azdl.commands.plan.render_stack", side_effect=lambda stack: (docs[stack], 0.1))
    mocker.patch("azdl.commands.policy.load_plans", side_effect=lambda p: [docs[s] for s in p])
    return docs


def test_plan_json_has_the_cost_of_each_stack(rendered, tmp_path, capsys):
    assert main(["plan", "dev", "-s", "prod", "--json", "--out", str(tmp_path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "azdl.plan-result/v1"
    assert [s["stack"] for s in document["stacks"]] == ["prod", "dev"]
    for entry in document["stacks"]:
        doc = rendered[entry["stack"]]
        est = cost.estimate(doc, load_prices(region=cost.region_of(doc)))
        assert entry["cost"]["max_per_hour"] == pytest.approx(est.max_per_hour)
        assert entry["cost"]["idle_per_month"] == pytest.approx(est.idle_per_month)
        assert len(entry["cost"]["lines"]) == len(est.lines) > 0
        assert json.loads((tmp_path / f"{entry['stack']}.json").read_text()) == doc
        assert entry["manifest"] == str(tmp_path / f"{entry['stack']}.json")
        # within their budgets; shipped prod has no operators and no way in (filled in by
        # each adopter), which `azdl plan` says
        expected = [] if entry["stack"] == "dev" else missing_ways_in(load_config(
            doc["config"], stack="prod"))  # fmt: skip
        assert entry["warnings"] == expected
    prod = next(e for e in document["stacks"] if e["stack"] == "prod")
    assert len(prod["warnings"]) == 2
    assert "no azdl:operators" in prod["warnings"][0] and "no way in" in prod["warnings"][1]


OPERATORS = [{"objectId": "11111111-2222-3333-4444-555555555555", "principalType": "Group"}]
JUMP_HOST = {"jumpHost": {"bastionSubnet": "10.50.17.0/26", "jumpHostSubnet": "10.50.18.0/29",
                          "sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkq0ZpWm8pGJk2b3r9"
                                          "pXbq2uYkXbZ1yq0t8p7oE6fM2 ops"}}  # fmt: skip
HUB = (
    "/subscriptions/00000000-0000-0000-0000-0000000000aa/resourceGroups/hub/providers/"
    "Microsoft.Network/virtualNetworks/hub"
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, ["no azdl:operators", "no way in"]),
        ({"azdl:operators": OPERATORS}, ["no way in"]),
        ({"azdl:access": JUMP_HOST}, ["no azdl:operators"]),
        ({"azdl:operators": OPERATORS, "azdl:access": JUMP_HOST}, []),
        ({"azdl:operators": OPERATORS, "network.dnsZoneVnetLinks": [HUB]}, []),
    ],
)
def test_plan_warns_when_nobody_could_use_a_private_stack(rendered, tmp_path, capsys, changes,
                                                          expected):  # fmt: skip
    config = rendered["prod"]["config"]
    for key, value in changes.items():
        if key.startswith("network."):
            config["azdl:network"] = {**config["azdl:network"], key.split(".", 1)[1]: value}
        else:
            config[key] = value
    assert main(["plan", "prod", "--json", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    (entry,) = json.loads(captured.out)["stacks"]
    assert len(entry["warnings"]) == len(expected)
    for warning, fragment in zip(entry["warnings"], expected, strict=True):
        assert fragment in warning
        assert f"warning: stack prod: {warning}" in captured.err


def test_plan_warns_when_the_clusters_at_max_exceed_the_gpu_budget(rendered, tmp_path, capsys):
    doc = rendered["dev"]
    doc["config"]["azdl:maxGpuSpendPerHourUsd"] = 1
    assert main(["plan", "dev", "--json", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    (entry,) = json.loads(captured.out)["stacks"]
    assert entry["cost"]["gpu_per_hour"] > 1
    (warning,) = entry["warnings"]
    assert "above the stack's maxGpuSpendPerHourUsd of 1.00" in warning
    assert f"warning: stack dev: {warning}" in captured.err
    # The policy pack, at `pulumi preview`, fails the same plan on the same figure.
    assert main(["policy", "dev", "--json"]) == 1
    violations = json.loads(capsys.readouterr().out)["stacks"][0]["violations"]
    budget = next(v for v in violations if v["policy"] == "gpu-spend-within-budget")
    assert f"maximum GPU spend {entry['cost']['gpu_per_hour']:.2f} USD/h" in budget["message"]
    assert budget["mandatory"] is True


def test_policy_json_lists_the_violations_per_stack(rendered, capsys):
    assert main(["policy", "dev", "prod", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "azdl.policy-result/v1" and document["passed"] is True
    assert [s["stack"] for s in document["stacks"]] == ["dev", "prod"]
    for entry in document["stacks"]:
        assert entry["passed"] is True
        for violation in entry["violations"]:  # advisory ones only, on the shipped stacks
            assert set(violation) == {"policy", "severity", "mandatory", "resource", "message"}
            assert violation["mandatory"] is False


def plan_text(argv, monkeypatch, capsys, **env):
    for name in ("NO_COLOR", "COLUMNS", "FORCE_COLOR"):
        monkeypatch.setenv(name, "")  # restored after the test, whatever the command sets
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(argv) == 0
    return capsys.readouterr().out


def test_colour_is_off_with_no_color_or_NO_COLOR(rendered, tmp_path, monkeypatch, capsys):
    argv = ["plan", "dev", "--no-tree", "--out", str(tmp_path)]
    cluster = next(r for r in rendered["dev"]["resources"] if r["type"] == ML_COMPUTE)
    cluster["inputs"]["properties"]["properties"]["vmSize"] = "Standard_Unpriced_v9"  # red line
    # FORCE_COLOR makes rich colour the piped output, so that turning it off can be seen.
    assert coloured(plan_text(argv, monkeypatch, capsys, FORCE_COLOR="1"))
    assert not coloured(plan_text([*argv, "--no-color"], monkeypatch, capsys, FORCE_COLOR="1"))
    assert not coloured(plan_text(["--no-color", *argv], monkeypatch, capsys, FORCE_COLOR="1"))
    assert not coloured(plan_text(argv, monkeypatch, capsys, FORCE_COLOR="1", NO_COLOR="1"))


def test_piped_tables_assume_no_width(rendered, tmp_path, monkeypatch, capsys):
    argv = ["plan", "prod", "--no-tree", "--out", str(tmp_path)]
    piped = plan_text(argv, monkeypatch, capsys)
    doc = rendered["prod"]
    est = cost.estimate(doc, load_prices(region=cost.region_of(doc)))
    rows = [line for line in piped.splitlines() if any(x.item in line for x in est.lines)]
    for line in est.lines:  # each row whole, on one line: not wrapped at rich's default of 80
        assert any(line.item in row and line.detail in row for row in rows), line
    assert max(len(row) for row in rows) > 80
    narrow = plan_text(argv, monkeypatch, capsys, COLUMNS="60")
    prose = ("note:", "not priced:", "one epoch", "manifest:")  # left to the terminal to wrap
    table = [line for line in narrow.splitlines() if not line.startswith(prose)]
    assert len(table) > len(rows) and max(len(line) for line in table) <= 60

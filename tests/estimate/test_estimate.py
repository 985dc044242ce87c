"""`azdl estimate` against hand-computed cases (--per-gpu-rate and --efficiency), the ring
all-reduce time against nccl-tests' definition of bus bandwidth, the price table and catalogue
shared with `azdl plan`, and bad input.

The hand-computed cases use a price file of their own: one region, ND96isr_H100_v5 (8 GPUs) at
100 USD/h dedicated and 40 USD/h low priority. 125 images/s per GPU is 1,000 per node; the
workload is 360,000 images × 10 epochs = 3.6 M images, so 1 node takes exactly 1 h. With
--efficiency 0.75, n > 1 nodes run at n × 750 images/s: 2 nodes 2/3 h, 3 nodes 4/9 h, 4 nodes
1/3 h, each 133.33 USD dedicated. Low priority at 0.1 evictions per node-hour, a 60-minute
checkpoint interval and no restart time loses 0.5 h per eviction: n nodes take
hours / (1 - n × 0.05).
"""

import itertools
import json

import pytest
import yaml

from azdl.cli import main
from azdl.errors import AzdlError
from azdl.estimate.throughput import PUBLISHED_FILE, read_published, ring_allreduce_seconds
from azdl.review.prices import PRICES_FILE

H100 = "Standard_ND96isr_H100_v5"
HAND = [
    "--vm-size", H100, "--region", "handregion", "--per-gpu-rate", "125", "--efficiency", "0.75",
    "--images", "360000", "--epochs", "10", "--max-nodes", "4", "--eviction-rate", "0.1",
    "--checkpoint-minutes", "60", "--restart-minutes", "0",
]  # fmt: skip


def price_file(tmp_path, low_priority: bool = True):
    region = {"date": "2026-11", "vmHourly": {H100: 100.0}}
    if low_priority:
        region["vmHourlyLowPriority"] = {H100: 40.0}
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump({"regions": {"handregion": region}}))
    return path


def estimate(capsys, *args) -> tuple[int, dict]:
    code = main(["estimate", *args, "--json"])
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "azdl.estimate-result/v1"
    return code, document


def option(doc, nodes, priority="Dedicated") -> dict:
    return next(o for o in doc["options"] if o["nodes"] == nodes and o["priority"] == priority)


def test_the_hand_computed_times_and_costs(tmp_path, capsys):
    _, doc = estimate(capsys, *HAND, "--prices", str(price_file(tmp_path)))
    for nodes, hours in ((1, 1.0), (2, 2 / 3), (3, 4 / 9), (4, 1 / 3)):
        dedicated = option(doc, nodes)
        assert dedicated["hours"] == pytest.approx(hours)
        assert dedicated["costUsd"] == pytest.approx(nodes * 100 * hours)
        assert dedicated["coresNeeded"] == nodes * 96  # 96 vCPUs per ND96isr_H100_v5
        low = option(doc, nodes, "LowPriority")
        assert low["hours"] == pytest.approx(hours / (1 - nodes * 0.1 * 0.5))
        assert low["costUsd"] == pytest.approx(nodes * 40 * low["hours"])
    assert doc["quota"] == "not read"


def test_a_deadline_one_node_meets(tmp_path, capsys):
    # Without low-priority prices, low priority is priced as dedicated and is slower: it loses.
    code, doc = estimate(capsys, *HAND, "--prices", str(price_file(tmp_path, False)),
                         "--deadline", "1.5h")  # fmt: skip
    assert code == 0
    assert doc["recommendation"] == {
        "vmSize": H100, "nodes": 1, "priority": "Dedicated", "hours": pytest.approx(1.0),
        "costUsd": pytest.approx(100.0),
    }  # fmt: skip


def test_a_deadline_that_needs_two_nodes(tmp_path, capsys):
    code, doc = estimate(capsys, *HAND, "--prices", str(price_file(tmp_path, False)),
                         "--deadline", "45m")  # fmt: skip
    assert code == 0
    rec = doc["recommendation"]
    assert (rec["nodes"], rec["priority"]) == (2, "Dedicated")
    assert rec["hours"] == pytest.approx(2 / 3) and rec["costUsd"] == pytest.approx(400 / 3)


def test_a_deadline_no_allowed_node_count_meets_says_what_it_needs(tmp_path, capsys):
    code, doc = estimate(capsys, *HAND, "--prices", str(price_file(tmp_path, False)),
                         "--deadline", "15m")  # fmt: skip
    assert code == 1 and doc["recommendation"] is None
    # The fastest allowed option is 4 nodes, 1/3 h; 6 nodes (1/4.5 h) would meet 0.25 h.
    assert "needs a deadline of at least 0.4 h" in doc["nearest"][0]
    assert doc["nearest"][1].startswith(f"or a larger maxNodes: 6 × {H100} (dedicated)")
    main(["estimate", *HAND, "--prices", str(price_file(tmp_path, False)), "--deadline", "15m"])
    printed = capsys.readouterr().out
    assert "no option meets the target" in printed and "or a larger maxNodes" in printed


def test_a_budget_only_gets_the_fastest_option_within_it(tmp_path, capsys):
    # Within 60 USD: low priority on 1 node (42.11 USD, 1.053 h) and 2 nodes (59.26, 0.741 h).
    code, doc = estimate(capsys, *HAND, "--prices", str(price_file(tmp_path)), "--budget", "60")
    assert code == 0
    rec = doc["recommendation"]
    assert (rec["nodes"], rec["priority"]) == (2, "LowPriority")
    assert rec["hours"] == pytest.approx((2 / 3) / 0.9)
    assert rec["costUsd"] == pytest.approx(2 * 40 * (2 / 3) / 0.9)


def test_low_priority_wins_on_cost_though_it_loses_on_time(tmp_path, capsys):
    code, doc = estimate(capsys, *HAND, "--prices", str(price_file(tmp_path)),
                         "--deadline", "1.1h")  # fmt: skip
    assert code == 0
    rec, dedicated = doc["recommendation"], option(doc, 1)
    assert (rec["nodes"], rec["priority"]) == (1, "LowPriority")
    assert rec["hours"] > dedicated["hours"] and rec["costUsd"] < dedicated["costUsd"]
    assert rec["hours"] == pytest.approx(1 / 0.95) and rec["costUsd"] == pytest.approx(40 / 0.95)


def test_no_target_gives_the_frontier_and_the_table_and_plot(tmp_path, capsys):
    prices = str(price_file(tmp_path))
    code, doc = estimate(capsys, *HAND, "--prices", prices)
    assert code == 0 and doc["recommendation"] is None
    front = sorted((o["hours"], o["costUsd"]) for o in doc["options"] if o["frontier"])
    # Pareto: each faster point costs more; 1-node low priority is the cheapest of all.
    assert all(a[1] > b[1] for a, b in itertools.pairwise(front))
    assert front[-1] == (pytest.approx(1 / 0.95), pytest.approx(40 / 0.95))
    png = tmp_path / "estimate.png"
    assert main(["estimate", *HAND, "--prices", prices, "--deadline", "1.1h", "--plot",
                 str(png)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "recommendation: 1 × Standard_ND96isr_H100_v5 (low-priority)" in printed
    assert "override: 125/GPU × 8" in printed and "source: low priority: 0.1" in printed


def test_ring_allreduce_time_follows_nccl_tests_bus_bandwidth():
    """NVIDIA/nccl-tests doc/PERFORMANCE.md (commit 03a204a): for AllReduce, algbw = S / t and
    busbw = algbw × 2 (n - 1) / n; so at a bus bandwidth B, t = S / (B × n / (2 (n - 1)))."""
    size, busbw = 102_228_128, 450.0
    for n in (2, 8, 16, 32):
        algbw = busbw * 1e9 * n / (2 * (n - 1))
        assert ring_allreduce_seconds(size, n, busbw) == pytest.approx(size / algbw)
    assert ring_allreduce_seconds(size, 1, busbw) == 0.0


def test_the_communication_model_scales_a_per_gpu_rate(tmp_path, capsys):
    """1,000 images/s per GPU at batch 256: a step computes 0.256 s; 2 nodes (16 GPUs) add half
    of a ring all-reduce of ResNet50's fp32 gradients at the 450 GB/s multi-node bus bandwidth
    of infra/nccl_baselines.yaml."""
    _, doc = estimate(capsys, "--vm-size", H100, "--region", "handregion", "--prices",
                      str(price_file(tmp_path)), "--per-gpu-rate", "1000", "--max-nodes", "2",
                      "--batch-per-gpu", "256")  # fmt: skip
    step = 0.256 + 0.5 * (2 * 15 / 16 * 25_557_032 * 4 / 450e9)
    assert option(doc, 2)["imagesPerSec"] == pytest.approx(16 * 256 / step)
    assert option(doc, 2)["throughputKind"] == "model"
    assert "450 GB/s" in option(doc, 2)["throughputSource"]


@pytest.fixture
def dev_prices(tmp_path):
    """The shipped price file with a price of its own for the dev cluster's size."""
    doc = yaml.safe_load(PRICES_FILE.read_text())
    doc["regions"]["eastus"]["vmHourly"]["Standard_NC24ads_A100_v4"] = 1.234
    doc["regions"]["westeurope"]["vmHourlyLowPriority"] = {"Standard_NC24ads_A100_v4": 0.5}
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_prices_and_fixed_costs_are_the_ones_azdl_plan_uses(dev_prices, shipped_plans, capsys):
    """`azdl plan`'s estimate of the dev stack (rendered once for the session by `azdl plan dev`)
    with the same price file prices the cluster at the price `azdl estimate` uses, and its idle
    floor is the stack's fixed cost `azdl estimate` adds (dev's clusters idle at 0 nodes)."""
    from azdl.review import cost
    from azdl.review.prices import load_prices

    plan = cost.estimate(shipped_plans["dev"], load_prices(dev_prices, region="westeurope"))
    assert any("Standard_NC24ads_A100_v4 at 1.234/node-h" in line.detail for line in plan.lines)
    code, doc = estimate(capsys, "-s", "dev", "--prices", str(dev_prices),
                         "--per-gpu-rate", "500", "--efficiency", "0.9")  # fmt: skip
    assert code == 0 and doc["region"] == "westeurope" and doc["maxNodes"] == 2
    assert option(doc, 1)["nodePriceUsdPerHour"] == 1.234
    assert option(doc, 1, "LowPriority")["nodePriceUsdPerHour"] == 0.5
    assert doc["fixedHourlyUsd"] * 730 == pytest.approx(plan.idle_per_month)
    assert doc["fixedHourlyUsd"] > 0
    one = option(doc, 1)
    assert one["costUsd"] == pytest.approx(one["hours"] * (1.234 + doc["fixedHourlyUsd"]))


def test_the_catalogue_is_the_one_the_stack_config_uses(tmp_path, capsys, monkeypatch):
    """A size added to infra.catalogue.VM_SIZES (what config validation reads) is estimated."""
    from infra.catalogue import VM_SIZES, VmSize

    monkeypatch.setitem(VM_SIZES, "Standard_Test_GPU", VmSize("Standard_Test_GPU", 4, "T", 16,
                                                               10, False))  # fmt: skip
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump({"regions": {"r": {"vmHourly": {"Standard_Test_GPU": 2.0}}}}))
    _, doc = estimate(capsys, "--region", "r", "--prices", str(path), "--per-gpu-rate", "10",
                      "--efficiency", "1", "--max-nodes", "1")  # fmt: skip
    assert {o["vmSize"] for o in doc["options"]} == {"Standard_Test_GPU"}
    assert option(doc, 1)["imagesPerSec"] == 40 and option(doc, 1)["coresNeeded"] == 10


@pytest.mark.slow  # renders the stack (seconds)
def test_the_prod_stack_estimate_prints_table_recommendation_and_sources(capsys):
    assert main(["estimate", "-s", "prod", "--deadline", "12h"]) == 0
    printed = capsys.readouterr().out
    assert "Time and cost of resnet50" in printed
    assert "recommendation: " in printed and "Standard_ND96isr_H100_v5" in printed
    assert "published, not measured here" in printed
    assert "source: prices: estimate: westeurope" in printed
    assert "source: fixed cost: stack prod's fixed cost" in printed
    assert "not read" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--deadline", "0"], "--deadline '0': expected a duration above 0"),
        (["--deadline", "soon"], "--deadline 'soon': expected a duration such as"),
        (["--budget=-5"], "--budget -5: expected a number of USD above 0"),
        (["--vm-size", "Standard_X"], "--vm-size: unknown VM size 'Standard_X'; known sizes:"),
        (["--vm-size", "Standard_ND96asr_v4"],
         "--vm-size Standard_ND96asr_v4 is not offered in handregion"),
        (["--vm-size", "Standard_D4s_v3"], "a CPU size (no GPUs)"),
        (["--efficiency", "1.5"], "--efficiency 1.5: expected a fraction above 0, at most 1"),
        (["--region", "nowhere"], "region nowhere: the price table"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_line(args, message, tmp_path, capsys):
    code = main(["estimate", "--prices", str(price_file(tmp_path)), "--region", "handregion",
                 *args])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow  # renders the stack (seconds)
def test_options_above_the_stacks_gpu_spend_limit_are_excluded_and_named(tmp_path, capsys):
    """dev allows 10 USD/h of GPUs; at 6 USD/h a node, 2 nodes (12 USD/h) are excluded, and a
    deadline only they would meet says the limit is what it needs."""
    doc = yaml.safe_load(PRICES_FILE.read_text())
    doc["regions"]["eastus"]["vmHourly"]["Standard_NC24ads_A100_v4"] = 6.0
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(doc))
    args = ["-s", "dev", "--prices", str(path), "--per-gpu-rate", "1000", "--efficiency", "1",
            "--images", "3600000", "--epochs", "1"]  # fmt: skip
    code, doc = estimate(capsys, *args, "--deadline", "45m")  # 1 node: 1 h, 2 nodes: 0.5 h
    assert code == 1 and doc["recommendation"] is None
    two = option(doc, 2)
    assert "12.00 USD/h is above maxGpuSpendPerHourUsd (10)" in two["excluded"]
    assert option(doc, 1)["excluded"] is None
    assert any("or a higher maxGpuSpendPerHourUsd: 2 × Standard_NC24ads_A100_v4" in line
               for line in doc["nearest"])  # fmt: skip


def test_low_priority_that_evictions_never_let_finish_is_excluded(tmp_path, capsys):
    # 4 nodes × 0.6 evictions/node-hour × (1 h / 2 + 0) = 1.2 lost hours per hour.
    args = [a if a != "0.1" else "0.6" for a in HAND]
    _, doc = estimate(capsys, *args, "--prices", str(price_file(tmp_path)))
    assert "come faster than checkpoints" in option(doc, 4, "LowPriority")["excluded"]
    assert option(doc, 1, "LowPriority")["hours"] == pytest.approx(1 / (1 - 0.3))


def test_deadline_and_budget_together_want_both(tmp_path, capsys):
    # Within 45 min and 60 USD: only 2-node low priority (0.741 h, 59.26 USD) fits.
    code, doc = estimate(capsys, *HAND, "--prices", str(price_file(tmp_path)),
                         "--deadline", "45m", "--budget", "60")  # fmt: skip
    assert code == 0
    assert (doc["recommendation"]["nodes"], doc["recommendation"]["priority"]) == (
        2, "LowPriority")  # fmt: skip
    code, doc = estimate(capsys, *HAND, "--prices", str(price_file(tmp_path)),
                         "--deadline", "30m", "--budget", "60")  # fmt: skip
    assert code == 1
    assert "needs a budget of at least" in doc["nearest"][0]


def gpu_kit_results(tmp_path, device="NVIDIA H100 80GB HBM3"):
    """p3_gpu.json as the GPU kit's own report script writes it (benchmarks/gpu/p3_report.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"))
    import p3_report

    row = {"label": "synthetic", "data": "synthetic", "model": "resnet50", "images_per_sec": 3200.0,
           "device": device, "torch": "2.11.0", "image_size": 224, "batch": 256,
           "precision": "bf16", "workers": "one", "sync_debug": True, "channels_last": True,
           "compile": False,
           "weights_channels_last": False, "kernel_time_share": 0.9}  # fmt: skip
    (tmp_path / "p3.jsonl").write_text(json.dumps(row))
    p3_report.main([str(tmp_path / "p3.jsonl"), "--command", "cmd", "--results", str(tmp_path)])
    return tmp_path / "p3_gpu.json"


def test_the_gpu_kits_single_gpu_rate_beats_published_rates(tmp_path, capsys):
    """3,200 images/s on one H100 at batch 256; one node of 8 all-reduces at the single-node
    478.87 GB/s, two nodes at the multi-node 450 GB/s (infra/nccl_baselines.yaml: expected)."""
    kit = gpu_kit_results(tmp_path)
    prices = str(price_file(tmp_path))
    _, doc = estimate(capsys, "--vm-size", H100, "--region", "handregion", "--prices", prices,
                      "--max-nodes", "2", "--gpu-results", str(kit))  # fmt: skip
    gradients = 25_557_032 * 4
    for nodes, busbw in ((1, 478.87e9), (2, 450e9)):
        gpus = 8 * nodes
        step = 256 / 3200 + 0.5 * (2 * (gpus - 1) / gpus * gradients / busbw)
        one = option(doc, nodes)
        assert one["throughputKind"] == "model"
        assert one["imagesPerSec"] == pytest.approx(gpus * 256 / step)
        assert "GPU kit" in one["throughputSource"] and str(kit) in one["throughputSource"]


def test_gpu_kit_results_of_an_unknown_gpu_are_refused_when_named(tmp_path, capsys):
    kit = gpu_kit_results(tmp_path, device="NVIDIA H100 PCIe")
    code = main(["estimate", "--vm-size", H100, "--region", "handregion", "--prices",
                 str(price_file(tmp_path)), "--gpu-results", str(kit)])  # fmt: skip
    assert code == 2
    assert "measured on 'NVIDIA H100 PCIe', a GPU of no catalogue size" in capsys.readouterr().err


def test_default_gpu_kit_results_are_the_projects_and_one_it_cannot_use_is_named(
    tmp_path, capsys, monkeypatch
):
    """The kit's results in the project the command runs in (benchmarks/gpu/run.sh writes them
    there), never beside the installed package: outside a project none are read."""
    team = tmp_path / "team"
    (team / "benchmarks" / "results").mkdir(parents=True)
    (team / "Pulumi.yaml").write_text("name: azdl\nruntime: python\n")
    kit = gpu_kit_results(tmp_path, device="NVIDIA H100 PCIe")
    (team / "benchmarks" / "results" / "p3_gpu.json").write_text(kit.read_text())
    argv = ["--vm-size", H100, "--region", "handregion", "--prices", str(price_file(tmp_path)),
            "--max-nodes", "1"]  # fmt: skip
    monkeypatch.chdir(team / "benchmarks")  # found as git finds a repository: upwards
    code, doc = estimate(capsys, *argv)
    assert code == 0
    (note,) = [s for s in doc["sources"] if "a GPU of no catalogue size" in s]
    assert f"{team}/benchmarks/results/p3_gpu.json" in note and "not used" in note
    assert option(doc, 1)["throughputKind"] == "published"
    monkeypatch.chdir(tmp_path)
    code, doc = estimate(capsys, *argv)
    assert code == 0 and not any("GPU kit" in s for s in doc["sources"])


def test_bad_input_with_a_stack_fails_before_the_stack_is_rendered(capsys, monkeypatch):
    def render(stack, reuse=False):
        raise AssertionError("rendered before the input was checked")

    monkeypatch.setattr("azdl.review.plan.render_stack", render)
    assert main(["estimate", "-s", "prod", "--vm-size", "Standard_X"]) == 2
    assert "unknown VM size 'Standard_X'" in capsys.readouterr().err
    assert main(["estimate", "-s", "nosuch"]) == 2
    assert "unknown stack 'nosuch'" in capsys.readouterr().err
    assert main(["estimate", "-s", "prod", "--region", "eastus"]) == 2
    assert "stack prod is in westeurope" in capsys.readouterr().err


def test_published_rates_name_catalogue_sizes_models_and_their_sources():
    from azdl.estimate.workload import MODELS
    from infra.catalogue import VM_SIZES

    for size, rows in read_published().items():
        gpus_per_node = VM_SIZES[size].gpus
        for row in rows:
            assert row["model"] in MODELS
            assert row["gpus"] < gpus_per_node or row["gpus"] % gpus_per_node == 0, (size, row)
            assert row["images_per_sec"] > 0 and row["batch_per_gpu"] > 0
            assert "/" in row["source"] and ("commit" in row["source"] or "run of" in row["source"])
            assert row["kind"] in ("published", "modelled")
            if row["kind"] == "modelled":  # from the same GPU chip, by a stated factor
                base = VM_SIZES[row["scaled_from"]]
                assert base.gpu_memory_gib == VM_SIZES[size].gpu_memory_gib
                assert base.gpu_model.split()[0] == VM_SIZES[size].gpu_model.split()[0]
                assert 0 < row["scale"] <= 1 and "datasheet" in row["source"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_gpu_size_a_shipped_stack_names_has_a_rate_so_a_cluster_is_proposed(
    capsys, monkeypatch, shipped_plans, stack
):
    """`azdl estimate -s STACK --deadline 7d` recommends a cluster of the stack's own size."""
    monkeypatch.setattr(
        "azdl.review.plan.render_stack", lambda s, reuse=False: (shipped_plans[s], 0.0)
    )
    code, doc = estimate(capsys, "-s", stack, "--deadline", "7d")
    assert code == 0 and doc["recommendation"] is not None
    size = doc["recommendation"]["vmSize"]
    rates = read_published()[size]
    assert any(r["model"] == doc["workload"]["model"] for r in rates), size


def test_a_modelled_rate_names_what_it_is_scaled_from(tmp_path):
    published = yaml.safe_load(PUBLISHED_FILE.read_text())
    published["Standard_NC24ads_A100_v4"][0]["scaled_from"] = "Standard_NC40ads_H100_v5"
    wrong = tmp_path / "published.yaml"
    wrong.write_text(yaml.safe_dump(published))
    with pytest.raises(AzdlError, match="scaled from Standard_NC40ads_H100_v5, which publishes no"):
        read_published(wrong)


@pytest.mark.slow  # renders the stack (seconds)
def test_quota_is_read_from_the_deployed_stack_and_marks_what_does_not_fit(monkeypatch, capsys):
    """--quota: the free cores of each size and priority, read with azdl submit's own quota
    read over azure-ai-ml's conversion of the REST API's documented responses."""
    from types import SimpleNamespace

    from azdl.jobs import stack_outputs, workspace
    from tests.azure.documented import documented, sdk_sizes, sdk_usages

    size = documented("vm_sizes_list.json")[0] | {
        "name": "Standard_ND96isr_H100_v5",
        "family": "standardNDSH100v5Family",
        "vCPUs": 96,
    }
    name = "Standard NDSH100v5 Family Cluster Dedicated vCPUs"
    family = documented("usage_list.json")[1] | {
        "id": "/subscriptions/s/usages/h100",
        "currentValue": 0,
        "limit": 192,
        "name": {"value": name, "localizedValue": name},
    }
    regional = documented("usage_list.json")[0] | {"currentValue": 0, "limit": 1000}
    low = {
        **regional,
        "id": "/subscriptions/s/usages/low",
        "limit": 500,
        "name": {"value": "Total Cluster LowPriority Regional vCPUs", "localizedValue": "x"},
    }
    compute = SimpleNamespace(
        list_usage=lambda location=None: sdk_usages([regional, family, low]),
        list_sizes=lambda location=None: sdk_sizes([size]),
    )  # fmt: skip
    asked = []
    monkeypatch.setattr(stack_outputs, "load_outputs", lambda stack: asked.append(stack) or
                        SimpleNamespace(values={"location": "westeurope"}))  # fmt: skip
    monkeypatch.setattr(workspace, "ml_client", lambda outputs: SimpleNamespace(compute=compute))
    code, doc = estimate(capsys, "-s", "prod", "--deadline", "12h", "--quota")
    assert code == 0 and asked == ["prod"]
    assert {(q["vmSize"], q["priority"]): q["freeCores"] for q in doc["quota"]} == {
        ("Standard_ND96isr_H100_v5", "Dedicated"): 192,
        ("Standard_ND96isr_H100_v5", "LowPriority"): 500,
    }
    assert main(["estimate", "-s", "prod", "--deadline", "12h", "--quota", "--all"]) == 0
    table = capsys.readouterr().out
    assert "192 free, short 192" in table  # 4 dedicated nodes: 384 cores
    assert "192 free" in table and "free cores read from stack prod's workspace" in table


def test_quota_needs_a_stack(capsys):
    assert main(["estimate", "--vm-size", "Standard_ND96isr_H100_v5", "--quota"]) == 2
    assert "--quota reads a deployed stack's quota: give -s STACK" in capsys.readouterr().err

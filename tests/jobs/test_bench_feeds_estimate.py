"""A results file written by `azdl bench`'s own cluster path (MLClient mocked, the recorded rank-0
logs of 1, 2 and 4 nodes of ND96isr_H100_v5; the 4-node job failed) feeds `azdl estimate`: the
measured node counts replace the model, the failed one is modelled from the measured rate."""

import json

import pytest
from bench_jobs import bench, jobs_ending

from azdl.cli import main

H100 = "Standard_ND96isr_H100_v5"
IMAGES = 1_281_167 * 90


def estimate(capsys, *args) -> dict:
    assert main(["estimate", "--vm-size", H100, "--max-nodes", "4", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def dedicated(doc, nodes) -> dict:
    return next(o for o in doc["options"] if o["nodes"] == nodes and o["priority"] == "Dedicated")


def test_measured_bench_results_override_the_model(ml_client, outputs_file, tmp_path, capsys):
    jobs_ending(ml_client.return_value, {1: "Completed", 2: "Completed", 4: "Failed"})
    out = tmp_path / "bench"
    assert bench(outputs_file, out) == 1  # the 4-node job failed
    results = out / "results.json"
    assert json.loads(results.read_text())["vm_size"] == H100
    capsys.readouterr()

    modelled = estimate(capsys)  # no bench: published rates and the model
    measured = estimate(capsys, "--bench", str(results))
    for nodes, rate in ((1, 2350.5), (2, 4420.8)):  # the recorded logs' figures
        option = dedicated(measured, nodes)
        assert option["throughputKind"] == "measured"
        assert option["imagesPerSec"] == rate
        assert option["hours"] == pytest.approx(IMAGES / rate / 3600)
        assert str(results) in option["throughputSource"]
        assert dedicated(modelled, nodes)["imagesPerSec"] != rate
    four = dedicated(measured, 4)
    assert four["throughputKind"] == "model"
    assert "measured rate" in four["throughputSource"]
    assert four["imagesPerSec"] == pytest.approx(32 * 2350.5 / 8, rel=0.01)  # ~linear on IB


def test_overrides_replace_the_measured_figures(ml_client, outputs_file, tmp_path, capsys):
    jobs_ending(ml_client.return_value, {1: "Completed", 2: "Completed"})
    out = tmp_path / "bench"
    assert bench(outputs_file, out, "--nodes", "1,2") == 0
    capsys.readouterr()
    doc = estimate(capsys, "--bench", str(out / "results.json"), "--efficiency", "0.5")
    two = dedicated(doc, 2)
    assert two["throughputKind"] == "override"
    assert two["imagesPerSec"] == pytest.approx(2350.5 * 2 * 0.5)


def test_a_local_bench_is_refused_with_the_reason(tmp_path, capsys):
    from azdl.jobs.report import Run, write_report

    write_report([Run(1, 1, "Completed", "log", {"images_per_sec": 5.0, "model": "resnet50"})],
                 tmp_path, "local", "workers", "worker")  # fmt: skip
    code = main(["estimate", "--vm-size", H100, "--bench", str(tmp_path / "results.json")])
    assert code == 2
    assert "names no vm_size (a --local bench" in capsys.readouterr().err

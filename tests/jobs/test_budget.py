"""Every cluster job has a time limit: `azdl submit --max-cost USD` turns into one at the price
table's price for the stack's region (the table `azdl plan` and `azdl estimate` read), else
--timeout, else the documented default; retries share the budget. Read back with azure-ai-ml's
own loader, as `az ml job create -f` reads the job."""

import math

import pytest
import yaml
from azure.ai.ml import load_job

from azdl.cli import main
from azdl.jobs import budget
from azdl.jobs import submit as submit_service
from azdl.review.prices import PRICES_FILE
from tests.jobs.failed_jobs import NCCL_IB, NON_ZERO, cluster
from training import live

H100 = "Standard_ND96isr_H100_v5"


def listed_price(size: str, region: str = "westeurope") -> float:
    """The table's figure, read from the YAML file itself (westeurope's VM prices are eastus's
    standing in, as the file says)."""
    block = yaml.safe_load(PRICES_FILE.read_text())["regions"][region]
    stand_in = block.get("standIn") or {}
    if "vmHourly" in stand_in.get("sections", ()):
        return listed_price(size, stand_in["region"])
    return block["vmHourly"][size]


def exported(outputs_file, tmp_path, *options, size=H100):
    out = tmp_path / "job.yml"
    argv = ["submit", "--outputs", str(outputs_file(vm_size=size)), "--nodes", "2",
            "--storage", "synthetic", "--export", str(out), *options]  # fmt: skip
    assert main(argv) == 0
    return load_job(out)


def test_max_cost_becomes_the_time_it_buys_on_the_jobs_nodes(ml_client, outputs_file, tmp_path):
    job = exported(outputs_file, tmp_path, "--max-cost", "500")
    assert job.limits.timeout == math.floor(500 / (2 * listed_price(H100)) * 3600)
    assert job.tags[budget.MAX_COST_TAG] == "500"
    assert float(job.tags[budget.RATE_TAG]) == pytest.approx(2 * listed_price(H100))
    # The same rate reaches rank 0, which charts the cost so far in MLflow (training.live).
    assert job.environment_variables[live.RATE_ENV] == job.tags[budget.RATE_TAG]
    ml_client.assert_not_called()


def test_without_a_budget_or_timeout_a_job_gets_the_default_limit_and_timeout_overrides_it(
    ml_client, outputs_file, tmp_path
):
    assert exported(outputs_file, tmp_path).limits.timeout == 24 * 3600
    assert exported(outputs_file, tmp_path, "--timeout", "3600").limits.timeout == 3600
    both = exported(outputs_file, tmp_path, "--timeout", "600", "--max-cost", "500")
    assert both.limits.timeout == 600  # the smaller of the two


def test_the_dry_run_says_where_the_limit_comes_from(ml_client, outputs_file, capsys):
    argv = ["submit", "--outputs", str(outputs_file(vm_size=H100)), "--nodes", "2",
            "--storage", "synthetic", "--max-cost", "500", "--dry-run"]  # fmt: skip
    assert main(argv) == 0
    seconds = math.floor(500 / (2 * listed_price(H100)) * 3600)
    out = capsys.readouterr().out  # a YAML comment beside the dry run's job
    rate = f"2 x {listed_price(H100):g} USD/h"
    assert f"time limit: {seconds} s (--max-cost 500 USD at {rate}" in out


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "argument --max-cost: '0': expected an amount in USD above 0"),
        ("ten", "argument --max-cost: 'ten': expected an amount in USD above 0"),
        ("0.5", "--max-cost 0.5 USD buys 9 s of 2 x"),  # less than a job needs to start
    ],
)
def test_a_budget_that_buys_nothing_is_refused_before_anything_is_sent(
    ml_client, outputs_file, capsys, value, message
):
    argv = ["submit", "--outputs", str(outputs_file(vm_size=H100)), "--nodes", "2",
            "--storage", "synthetic", "--max-cost", value]  # fmt: skip
    with pytest.raises(SystemExit) if value in ("0", "ten") else _returns_error():
        main(argv)
    assert message in capsys.readouterr().err
    ml_client.assert_not_called()


class _returns_error:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_an_unpriced_size_cannot_take_a_budget(ml_client, outputs_file, capsys, monkeypatch):
    prices = PRICES_FILE.read_text().replace(f"      {H100}: ", f"      #{H100}: ")
    path = PRICES_FILE.parent / "prices-test-unpriced.yaml"
    monkeypatch.setenv("AZDL_PRICES", str(path))
    path.write_text(prices)
    try:
        argv = ["submit", "--outputs", str(outputs_file(vm_size=H100)), "--nodes", "2",
                "--storage", "synthetic", "--max-cost", "500", "--dry-run"]  # fmt: skip
        assert main(argv) != 0
    finally:
        path.unlink()
    err = capsys.readouterr().err
    assert f"--max-cost needs the nodes' price, and VM size {H100} has no price" in err


def test_retries_share_the_budget(ml_client, outputs_file, monkeypatch, capsys):
    ticks = iter(range(0, 10**6, 3000))  # every attempt runs 3000 s on this clock
    monkeypatch.setattr(submit_service, "CLOCK", lambda: next(ticks))
    names = ("r1", "r1-retry1", "r1-retry2")
    client = cluster(ml_client, {n: ("Failed", NON_ZERO, NCCL_IB) for n in names})
    rate = 2 * listed_price(H100)
    budget_usd = rate * 2.5  # 2.5 hours of the two nodes
    argv = ["submit", "--outputs", str(outputs_file(vm_size=H100, max_nodes=4)), "--nodes",
            "2", "--storage", "synthetic", "--name", "r1", "--max-retries", "5",
            "--max-cost", f"{budget_usd}"]  # fmt: skip
    assert main(argv) == 1
    limits = [c.args[0].limits.timeout for c in client.jobs.create_or_update.call_args_list]
    # 9000 s bought; attempt 1 spends 3000, attempt 2 another 3000, then 3000 s are left for
    # attempt 3; after it nothing is: no fourth attempt.
    assert limits == [9000, 6000, 3000]
    assert "but the budget is spent: --max-cost" in capsys.readouterr().err


def test_the_jobs_that_are_not_training_have_the_default_limit_too(outputs):
    from azdl.jobs.fill_nfs import build_fill_nfs_job
    from azdl.jobs.health import build_check_job

    stack = outputs(vm_size=H100)
    assert build_check_job(stack, 2, "c1", "azdl").limits.timeout == budget.DEFAULT_TIMEOUT_S
    fill = build_fill_nfs_job(stack, "imagenet", "f1", "azdl")
    assert fill.limits.timeout == budget.DEFAULT_TIMEOUT_S

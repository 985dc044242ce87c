"""The scaling report from recorded throughput lines (a crashed run included), the cluster bench
with MLClient mocked (a size that errors included), and the local bench end to end."""

import json
from types import SimpleNamespace

import pytest
from azure.core.exceptions import HttpResponseError
from bench_jobs import DATA, bench, download_recorded_log, jobs_ending, nodes_of

from azdl.cli import main
from azdl.jobs.bench import default_nodes, record_of
from azdl.jobs.report import Run, baseline_note, markdown_table, with_efficiency, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def recorded_runs() -> list[Run]:
    """Runs built from recorded logs: 1, 2 and 4 nodes of 8 GPUs; the 4-node job crashed."""
    runs = []
    for nodes, status in ((1, "Completed"), (2, "Completed"), (4, "Failed")):
        record, error = record_of((DATA / f"cluster-{nodes}-nodes.log").read_text())
        runs.append(Run(nodes, nodes * 8, status, f"job-{nodes}", record, error))
    return runs


def test_logs_yield_the_rank0_record_or_say_why_not():
    runs = recorded_runs()
    assert [r.images_per_sec for r in runs] == [2350.5, 4420.8, None]
    assert runs[2].error == "no throughput line in the log"


def test_efficiency_is_per_gpu_throughput_against_the_smallest_successful_run():
    rows = with_efficiency(recorded_runs())
    assert [r["workers"] for r in rows] == [8, 16, 32]
    assert rows[0]["efficiency"] == pytest.approx(1.0)
    assert rows[1]["per_worker"] == pytest.approx(4420.8 / 16)
    assert rows[1]["efficiency"] == pytest.approx((4420.8 / 16) / (2350.5 / 8))
    assert rows[2]["efficiency"] is None and rows[2]["status"] == "Failed"


def test_report_keeps_the_crashed_run_in_json_table_and_plot(tmp_path):
    paths = write_report(
        recorded_runs(), tmp_path, "keras resnet50, ND96isr_H100_v5", "GPUs", "GPU"
    )
    document = json.loads(paths["json"].read_text())
    assert document["schema"] == "azdl.bench/v1"
    assert [r["nodes"] for r in document["runs"]] == [1, 2, 4]
    crashed = document["runs"][2]
    assert (crashed["status"], crashed["record"], crashed["job"]) == ("Failed", None, "job-4")
    assert document["baseline"] == {"nodes": 1, "workers": 8, "job": "job-1"}
    table = paths["table"].read_text().splitlines()
    assert table[2] == "Efficiency is against 1 node, 8 GPUs."
    assert table[4] == "| nodes | GPUs | images/sec | per GPU | efficiency | status |"
    assert table[6] == "| 1 | 8 | 2350.5 | 293.8 | 100% | Completed |"
    assert table[7] == "| 2 | 16 | 4420.8 | 276.3 | 94% | Completed |"
    assert table[8] == "| 4 | 32 | – | – | – | Failed: no throughput line in the log |"
    png = paths["plot"].read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000


def test_a_report_of_only_failed_runs_still_renders(tmp_path):
    runs = [Run(1, 8, "Canceled", "job-1", None, "no throughput line in the log")]
    assert "| 1 | 8 | – | – | – | Canceled" in markdown_table(with_efficiency(runs), "GPUs", "GPU")
    paths = write_report(runs, tmp_path, "t", "GPUs", "GPU")
    assert paths["plot"].read_bytes().startswith(PNG_MAGIC)
    document = json.loads(paths["json"].read_text())
    assert document["baseline"] is None
    assert "there is no baseline" in paths["table"].read_text()


def test_a_failed_run_with_a_figure_is_not_the_baseline_and_is_marked_not_counted(tmp_path):
    """The 1-node job printed its throughput line, then failed: its figure must not become
    the 100 % every other size is measured against."""
    runs = recorded_runs()
    runs[0].status = "Failed"
    rows = with_efficiency(runs)
    assert [(r["workers"], r["counted"]) for r in rows] == [(8, False), (16, True), (32, False)]
    assert rows[0]["images_per_sec"] is None and rows[0]["record"]["images_per_sec"] == 2350.5
    assert rows[1]["efficiency"] == pytest.approx(1.0)
    paths = write_report(runs, tmp_path, "t", "GPUs", "GPU")
    document = json.loads(paths["json"].read_text())
    assert document["baseline"] == {"nodes": 2, "workers": 16, "job": "job-2"}
    assert "1 node, 8 GPUs was not measured" in document["baseline_note"]
    table = paths["table"].read_text()
    assert (
        "Efficiency is against 2 nodes, 16 GPUs, the smallest measured run "
        "(1 node, 8 GPUs was not measured)." in table
    )
    assert "| 1 | 8 | (2350.5, not counted) | – | – | Failed |" in table
    assert "| 2 | 16 | 4420.8 | 276.3 | 100% | Completed |" in table


def test_cpu_runs_are_counted_per_process():
    runs = [Run(1, 1, "Completed", "job-1", {"images_per_sec": 30.0})]
    header = markdown_table(with_efficiency(runs), "processes", "process").splitlines()[0]
    assert header == "| nodes | processes | images/sec | per process | efficiency | status |"


def test_a_single_worker_baseline_is_named_in_the_singular():
    runs = [Run(1, 1, "Completed", "w1", {"images_per_sec": 30.0}), Run(1, 2, "Completed", "w2")]
    assert baseline_note(runs, "workers", "worker") == "Efficiency is against 1 node, 1 worker."


def test_default_node_counts_double_up_to_the_cluster_maximum():
    assert default_nodes(1) == [1]
    assert default_nodes(4) == [1, 2, 4]
    assert default_nodes(6) == [1, 2, 4, 6]


def test_cluster_bench_submits_each_size_in_turn_and_reports_every_job(
    ml_client, outputs_file, tmp_path, capsys
):
    client = ml_client.return_value
    jobs_ending(client, {1: "Completed", 2: "Completed", 4: "Failed"})
    out = tmp_path / "bench"
    assert bench(outputs_file, out) == 1
    jobs = [c.args[0] for c in client.jobs.create_or_update.call_args_list]
    assert [j.resources.instance_count for j in jobs] == [1, 2, 4]
    for job in jobs:
        assert job.inputs == {} and "--data-dir" not in job.command  # synthetic data
        assert "--steps-per-epoch 120" in job.command
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [(r["nodes"], r["workers"], r["status"]) for r in runs] == [
        (1, 8, "Completed"),
        (2, 16, "Completed"),
        (4, 32, "Failed"),
    ]
    assert "| 4 | 32 | – | – | – | Failed" in capsys.readouterr().out


def test_cluster_bench_under_torchrun_submits_pytorch_distribution_jobs(
    ml_client, outputs_file, tmp_path
):
    from azure.ai.ml import PyTorchDistribution

    client = ml_client.return_value
    jobs_ending(client, {1: "Completed", 2: "Completed"})
    assert bench(outputs_file, tmp_path / "b", "--framework", "torch", "--launcher",
                 "torchrun", "--nodes", "1,2") == 0  # fmt: skip
    jobs = [c.args[0] for c in client.jobs.create_or_update.call_args_list]
    for job in jobs:
        assert isinstance(job.distribution, PyTorchDistribution)
        assert f"torchrun --nnodes={job.resources.instance_count} --nproc-per-node=8 " in (
            job.command
        )
    runs = json.loads((tmp_path / "b" / "results.json").read_text())["runs"]
    assert [r["workers"] for r in runs] == [8, 16]


def test_horovods_transport_is_for_the_local_bench_only(ml_client, outputs_file, tmp_path, capsys):
    assert bench(outputs_file, tmp_path / "b", "--transport", "gloo") == 2
    assert "--transport gloo is Horovod's on this machine: it goes with --local" in (
        capsys.readouterr().err
    )
    ml_client.return_value.jobs.create_or_update.assert_not_called()


def test_a_completed_bench_exits_zero(ml_client, outputs_file, tmp_path):
    jobs_ending(ml_client.return_value, {1: "Completed", 2: "Completed"})
    assert bench(outputs_file, tmp_path / "bench", "--nodes", "1,2") == 0


def test_bench_json_prints_the_results_document(ml_client, outputs_file, tmp_path, capsys):
    jobs_ending(ml_client.return_value, {1: "Completed", 2: "Completed"})
    assert bench(outputs_file, tmp_path / "bench", "--nodes", "1,2", "--json") == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)  # stdout holds the document and nothing else
    written = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert printed == written and next(iter(printed)) == "schema"
    assert printed["schema"] == "azdl.bench/v1"
    assert "wrote " in captured.err


@pytest.mark.parametrize("step", ["submit", "logs"])
def test_an_error_around_one_size_is_reported_and_the_sweep_goes_on(
    step, ml_client, outputs_file, tmp_path
):
    """The 2-node submission is refused, or its logs cannot be downloaded (a job without logs,
    a transient HTTP error): that size is an error in the report, the others still run."""
    client = ml_client.return_value
    jobs_ending(client, {1: "Completed", 2: "Completed", 4: "Failed"})
    submit, download = client.jobs.create_or_update.side_effect, download_recorded_log
    refused = HttpResponseError(message="(ServiceError) try again later")

    def failing(target, kind):
        def call(*args, **kwargs):
            job = args[0]
            if kind == step and nodes_of(getattr(job, "name", job)) == 2:
                raise refused
            return target(*args, **kwargs)

        return call

    client.jobs.create_or_update.side_effect = failing(submit, "submit")
    client.jobs.download.side_effect = failing(download, "logs")
    out = tmp_path / "bench"
    assert bench(outputs_file, out) == 1
    assert client.jobs.create_or_update.call_count == 3
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [(r["nodes"], r["status"], r["counted"]) for r in runs] == [
        (1, "Completed", True),
        (2, "error", False),
        (4, "Failed", False),
    ]
    assert runs[1]["job"].startswith("azdl-keras-2n-")
    expected = "HttpResponseError: (ServiceError) try again later"
    if step == "logs":
        expected = "job Completed, then reading its logs failed: " + expected
    assert runs[1]["error"] == expected
    assert f"| 2 | 16 | – | – | – | error: {expected} |" in (out / "results.md").read_text()


def test_the_report_is_written_after_each_size_so_an_interrupt_keeps_it(
    ml_client, outputs_file, tmp_path
):
    client = ml_client.return_value
    jobs_ending(client, {1: "Completed", 2: "Completed", 4: "Completed"})
    submit = client.jobs.create_or_update.side_effect

    def interrupted_at_two_nodes(job):
        if job.resources.instance_count == 2:
            raise KeyboardInterrupt
        return submit(job)

    client.jobs.create_or_update.side_effect = interrupted_at_two_nodes
    out = tmp_path / "bench"
    assert bench(outputs_file, out) == 130
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [(r["nodes"], r["status"], r["counted"]) for r in runs] == [(1, "Completed", True)]
    assert (out / "scaling.png").read_bytes().startswith(PNG_MAGIC)


def test_a_job_past_the_wait_limit_is_cancelled_and_reported(ml_client, outputs_file, tmp_path):
    client = ml_client.return_value
    jobs_ending(client, {1: "Completed", 2: "Queued", 4: "Completed"})
    status_of, cancelled = client.jobs.get.side_effect, []
    client.jobs.begin_cancel.side_effect = cancelled.append
    # A cancelled job is still on the cluster for two more polls, then Canceled.
    polls_after_cancel = iter(["CancelRequested", "Finalizing"])
    client.jobs.get.side_effect = lambda name: SimpleNamespace(
        status=next(polls_after_cancel, "Canceled") if name in cancelled else status_of(name).status
    )
    out = tmp_path / "bench"
    assert bench(outputs_file, out, "--timeout-minutes", "0.0001") == 1
    (stuck,) = cancelled
    assert nodes_of(stuck) == 2
    # The 4-node job goes in only once the cancelled one has stopped.
    last_poll_of_stuck = max(
        i for i, c in enumerate(client.jobs.mock_calls) if c[0] == "get" and c.args == (stuck,)
    )
    four = [i for i, c in enumerate(client.jobs.mock_calls) if c[0] == "create_or_update"][2]
    assert last_poll_of_stuck < four
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [r["status"] for r in runs] == ["Completed", "error", "Completed"]
    assert runs[1]["error"].startswith(f"job {stuck} is still Queued after the wait's limit")
    assert runs[1]["error"].endswith("; cancelled (Canceled)")


def test_the_wait_limit_must_be_positive(outputs_file, tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench(outputs_file, tmp_path, "--timeout-minutes", "0")
    assert "--timeout-minutes: '0': expected a number of minutes above 0" in capsys.readouterr().err


def test_cluster_bench_checks_every_size_before_submitting_any(ml_client, outputs_file, capsys):
    path = outputs_file(max_nodes=4)
    assert main(["bench", "--outputs", str(path), "--nodes", "1,2,8"]) == 2
    assert "--nodes 8 is not possible" in capsys.readouterr().err
    ml_client.return_value.jobs.create_or_update.assert_not_called()


@pytest.mark.slow
@pytest.mark.training_env
def test_local_bench_runs_one_and_two_workers_and_reports_them(tmp_path, capsys):
    out = tmp_path / "local"
    tiny = ["--model", "tiny", "--image-size", "32", "--batch-size", "8",
            "--steps-per-epoch", "8", "--timing-warmup-steps", "2"]  # fmt: skip
    assert main(["bench", "--local", "--out", str(out), "--", *tiny]) == 0
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [(r["workers"], r["status"]) for r in runs] == [(1, "Completed"), (2, "Completed")]
    for run in runs:
        record = run["record"]
        assert record["workers"] == run["workers"]
        assert (record["model"], record["image_size"], record["timed_steps"]) == ("tiny", 32, 6)
        assert run["images_per_sec"] > 0
    assert runs[0]["efficiency"] == pytest.approx(1.0)
    assert (out / "scaling.png").read_bytes().startswith(PNG_MAGIC)
    assert "| 1 | 2 |" in capsys.readouterr().out


def test_a_real_local_log_yields_its_record():
    """The log of the README's `azdl bench --local` run with 2 workers (horovodrun prefixes)."""
    record, error = record_of((DATA / "local-2-workers.log").read_text())
    assert error is None
    assert (record["workers"], record["images_per_sec"], record["timed_steps"]) == (2, 21.73, 15)

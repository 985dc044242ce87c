"""The scaling report from recorded throughput lines (a crashed run included), the cluster bench
with MLClient mocked, and the local bench end to end."""

import json
import shutil
from pathlib import Path

import pytest

from azdl.cli import main
from azdl.commands.bench import default_nodes, record_of
from azdl.jobs.report import Run, markdown_table, with_efficiency, write_report

DATA = Path(__file__).with_name("data")
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
    paths = write_report(recorded_runs(), tmp_path, "keras resnet50, ND96isr_H100_v5", "GPUs")
    document = json.loads(paths["json"].read_text())
    assert document["schema"] == "azdl.bench/v1"
    assert [r["nodes"] for r in document["runs"]] == [1, 2, 4]
    crashed = document["runs"][2]
    assert (crashed["status"], crashed["record"], crashed["job"]) == ("Failed", None, "job-4")
    table = paths["table"].read_text().splitlines()
    assert table[2] == "| nodes | GPUs | images/sec | per GPU | efficiency | status |"
    assert table[4] == "| 1 | 8 | 2350.5 | 293.8 | 100% | Completed |"
    assert table[5] == "| 2 | 16 | 4420.8 | 276.3 | 94% | Completed |"
    assert table[6] == "| 4 | 32 | – | – | – | Failed: no throughput line in the log |"
    png = paths["plot"].read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000


def test_a_report_of_only_failed_runs_still_renders(tmp_path):
    runs = [Run(1, 8, "Canceled", "job-1", None, "no throughput line in the log")]
    assert "| 1 | 8 | – | – | – | Canceled" in markdown_table(with_efficiency(runs), "GPUs")
    assert write_report(runs, tmp_path, "t", "GPUs")["plot"].read_bytes().startswith(PNG_MAGIC)


def test_default_node_counts_double_up_to_the_cluster_maximum():
    assert default_nodes(1) == [1]
    assert default_nodes(4) == [1, 2, 4]
    assert default_nodes(6) == [1, 2, 4, 6]


def test_cluster_bench_submits_each_size_in_turn_and_reports_every_job(
    ml_client, outputs_file, tmp_path, capsys
):
    client = ml_client.return_value
    statuses = {}

    def get(name):
        return type("Job", (), {"status": statuses[name]})

    def download(name, download_path, **options):
        assert options == {}, "only the logs, not the named outputs (checkpoints)"
        nodes = int(name.split("-")[2].removesuffix("n"))
        target = Path(download_path) / "user_logs"
        target.mkdir(parents=True)
        shutil.copy(DATA / f"cluster-{nodes}-nodes.log", target / "std_log_process_0.txt")

    def create(job):
        statuses[job.name] = "Failed" if job.resources.instance_count == 4 else "Completed"
        return type("Created", (), {"name": job.name})

    client.jobs.create_or_update.side_effect = create
    client.jobs.get.side_effect = get
    client.jobs.download.side_effect = download
    out = tmp_path / "bench"
    path = outputs_file(max_nodes=4)
    assert main(["bench", "--outputs", str(path), "--out", str(out), "--poll-seconds", "0"]) == 1
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

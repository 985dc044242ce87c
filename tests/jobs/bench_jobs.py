"""The cluster bench's Azure ML jobs as tests fake them (MLClient mocked): each job ends with the
status given for its node count, and its rank-0 log is the one recorded for that size. Shared
by test_bench.py and test_bench_feeds_estimate.py."""

import shutil
from pathlib import Path
from types import SimpleNamespace

from azdl.cli import main

DATA = Path(__file__).with_name("data")


def nodes_of(job_name: str) -> int:
    return int(job_name.split("-")[2].removesuffix("n"))  # azdl-keras-<nodes>n-…


def download_recorded_log(name, download_path, **options):
    """jobs.download as Azure ML does it: the recorded rank-0 log of that size under user_logs/."""
    assert options == {}, "only the logs, not the named outputs (checkpoints)"
    target = Path(download_path) / "user_logs"
    target.mkdir(parents=True)
    shutil.copy(DATA / f"cluster-{nodes_of(name)}-nodes.log", target / "std_log_process_0.txt")


def jobs_ending(client, statuses_by_nodes: dict[int, str]) -> None:
    """Each submitted job reports the status given for its node count."""
    statuses = {}

    def create(job):
        statuses[job.name] = statuses_by_nodes[job.resources.instance_count]
        return SimpleNamespace(name=job.name)

    client.jobs.create_or_update.side_effect = create
    client.jobs.get.side_effect = lambda name: SimpleNamespace(status=statuses[name])
    client.jobs.download.side_effect = download_recorded_log


def bench(outputs_file, out: Path, *options: str) -> int:
    path = outputs_file(max_nodes=4)
    return main(
        ["bench", "--outputs", str(path), "--out", str(out), "--poll-seconds", "0", *options]
    )

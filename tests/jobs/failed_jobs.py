"""Failed Azure ML jobs as the mocked MLClient reports them, with Azure ML's and NCCL's own texts
(sources beside each), for the retry and budget tests."""

import json

from azure.ai.ml.exceptions import ErrorCategory, ErrorTarget, JobException


def azure_error(message: str) -> JobException:
    """What azure-ai-ml's jobs.stream raises for a failed job (_job_ops_helper: "Exception : "
    and the run's error as JSON)."""
    error = {"error": {"code": "UserError", "message": message}}
    return JobException(message=f"Exception : \n {json.dumps(error, indent=4)} ",
                        target=ErrorTarget.JOB, no_personal_data_message="failed job",
                        error_category=ErrorCategory.SYSTEM_ERROR)  # fmt: skip


# Azure/MachineLearningNotebooks#1242 (2020-11-18): a low-priority node pre-empted.
PREEMPTED = (
    "AzureMLCompute job failed.\nPreemptionError: Nodes of this job got pre-empted. Check if the "
    "run has failed or restarted.\n\tReason: Received pre-emption warning signal"
)
# Azure/MachineLearningNotebooks#1360 (2021-02-23): the script exited non-zero.
NON_ZERO = (
    "AzureMLCompute job failed.\nJobFailed: Submitted script failed with a non-zero exit code; "
    "see the driver log file for details.\n\tReason: Job failed with non-zero exit Code"
)
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/opt/azdl/training/tensorflow/train_keras.py", line 40\n'
    "KeyError: 'labels'\n"
)
# stas00/ml-engineering, debug/pytorch.md: NCCL's InfiniBand completion error.
NCCL_IB = (
    "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
    "10.2.0.5<33092> with error 12, opcode 0, len\n0, vendor err 129 (Recv)\n"
)


def cluster(ml_client, outcomes: dict[str, tuple[str, str, str]]):
    """The mocked workspace: job name -> (final status, Azure ML's error, log text)."""
    client = ml_client.return_value

    def stream(name):
        status, error, _ = outcomes[name]
        if status == "Failed":
            raise azure_error(error)

    def download(name, download_path, **kwargs):
        (__import__("pathlib").Path(download_path) / "std_log.txt").write_text(outcomes[name][2])

    client.jobs.stream.side_effect = stream
    client.jobs.get.side_effect = lambda name: type("J", (), {"status": outcomes[name][0]})
    client.jobs.download.side_effect = download
    return client

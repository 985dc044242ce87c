"""`azdl submit --max-retries` with MLClient mocked: a pre-empted job resumes from the first
attempt's checkpoints, a code error is not retried, and running out of retries says so. The
failures carry Azure ML's and NCCL's own texts (sources in azdl/jobs/retry.py)."""

import json

import pytest
from azure.ai.ml.exceptions import ErrorCategory, ErrorTarget, JobException

from azdl.cli import main
from azdl.jobs import own_environment
from azdl.jobs.retry import Outcome, classify
from tests.jobs.failed_jobs import NCCL_IB, NON_ZERO, PREEMPTED, TRACEBACK, cluster


def submit(outputs_file, *extra):
    path = outputs_file(vm_size="Standard_ND96isr_H100_v5", max_nodes=4)
    return main(["submit", "--outputs", str(path), "--nodes", "2", "--storage", "synthetic",
                 "--name", "r1", *extra])  # fmt: skip


def test_a_preempted_job_resumes_from_the_first_attempts_checkpoints(
    ml_client, outputs_file, capsys
):
    client = cluster(ml_client, {"r1": ("Failed", PREEMPTED, "step 300\n"),
                                 "r1-retry1": ("Completed", "", "")})  # fmt: skip
    assert submit(outputs_file, "--max-retries", "2") == 0
    first, second = (c.args[0] for c in client.jobs.create_or_update.call_args_list)
    assert first.name == "r1" and second.name == "r1-retry1"
    for job in (first, second):  # both write and read the first attempt's checkpoints
        assert job.outputs["checkpoints"].path == (
            "azureml://datastores/azdl_outputs/paths/azdl/r1/checkpoints/"
        )
    assert second.outputs["logs"].path.endswith("/azdl/r1-retry1/logs/")
    assert second.tags["azdl.resume_from"] == "r1"
    assert (second.tags["azdl.attempt"], second.tags["azdl.retry_of"]) == ("2", "r1")
    out = capsys.readouterr().out
    assert "attempt 1 Failed: a node was pre-empted; resubmitting from its checkpoints" in out
    assert "  1. r1: Failed (a node was pre-empted)\n  2. r1-retry1: Completed (completed)" in out


def test_json_with_retries_is_one_document_with_the_attempts(ml_client, outputs_file, capsys):
    cluster(ml_client, {"r1": ("Failed", PREEMPTED, "step 300\n"),
                        "r1-retry1": ("Completed", "", "")})  # fmt: skip
    assert submit(outputs_file, "--max-retries", "2", "--json") == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)  # stdout holds the document and nothing else
    assert document["schema"] == "azdl.submit-result/v1"
    assert (document["name"], document["status"]) == ("r1-retry1", "Completed")
    assert [(a["name"], a["status"], a["reason"]) for a in document["attempts"]] == [
        ("r1", "Failed", "a node was pre-empted"),
        ("r1-retry1", "Completed", "completed"),
    ]
    assert "resubmitting from its checkpoints" in captured.err


def test_a_code_error_is_not_retried(ml_client, outputs_file, capsys):
    client = cluster(ml_client, {"r1": ("Failed", NON_ZERO, TRACEBACK)})
    assert submit(outputs_file, "--max-retries", "3") == 1
    assert client.jobs.create_or_update.call_count == 1
    err = capsys.readouterr().err
    assert "not retried: the script raised a Python exception: fix the code" in err


def test_a_job_whose_own_environment_lacks_the_runtime_is_not_retried_and_says_why(
    ml_client, outputs_file, capsys
):
    """The line the first step of an --environment job prints (azdl.jobs.own_environment)."""
    hint = own_environment.install_hint()
    line = (f"{own_environment.MISSING_RUNTIME} (missing: training.guard): install it into the "
            f"environment with {hint}, or submit without --environment")  # fmt: skip
    client = cluster(ml_client, {"r1": ("Failed", NON_ZERO, line + "\n")})
    assert submit(outputs_file, "--max-retries", "3", "--environment", "team-pytorch@3") == 1
    assert client.jobs.create_or_update.call_count == 1
    err = capsys.readouterr().err
    assert "not retried: this environment lacks the azdl runtime (missing: training.guard): " in err
    assert hint in err


def test_running_out_of_retries_says_so(ml_client, outputs_file, capsys):
    names = ("r1", "r1-retry1", "r1-retry2")
    client = cluster(ml_client, {n: ("Failed", NON_ZERO, NCCL_IB) for n in names})
    assert submit(outputs_file, "--max-retries", "2") == 1
    assert [c.args[0].name for c in client.jobs.create_or_update.call_args_list] == list(names)
    captured = capsys.readouterr()
    assert "  3. r1-retry2: Failed (an NCCL network or system error)" in captured.out
    assert (
        "gave up: the job failed 3 times, and --max-retries 2 allowed 2 retries; the checkpoints "
        "of r1 are kept for --resume-from r1" in captured.err
    )


@pytest.mark.parametrize(
    ("status", "error", "logs", "retry"),
    [
        ("Failed", PREEMPTED, "", True),
        ("Failed", NON_ZERO, "azdl-health: FAIL node nd-node-2 is unhealthy: the job stops", True),
        ("Failed", NON_ZERO, TRACEBACK + NCCL_IB, True),  # a Python error raised by NCCL's
        ("Failed", NON_ZERO, "RuntimeError: NCCL error: unhandled system error\n", True),
        ("Failed", NON_ZERO, "usage: python -m training.tensorflow.train_keras [-h]\n"
         "python -m training.tensorflow.train_keras: error: --lr\n", False),
        ("Failed", NON_ZERO, "", False),
        ("Failed", "", "", False),  # nothing recognised: not spent again
        ("Canceled", "", "", False),
        ("NotResponding", "", "", True),
    ],
)  # fmt: skip
def test_transient_failures_are_retried_and_the_users_own_are_not(status, error, logs, retry):
    assert classify(status, error, logs).retry is retry


def test_ctrl_c_while_following_stops_following_and_leaves_the_job_running(
    ml_client, outputs_file, capsys
):
    client = cluster(ml_client, {"r1": ("Running", "", "")})
    client.jobs.stream.side_effect = JobException(  # what azure-ai-ml raises on Ctrl-C
        message="The output streaming for the run interrupted.",
        target=ErrorTarget.JOB,
        no_personal_data_message="interrupted",
        error_category=ErrorCategory.USER_ERROR,
    )
    assert submit(outputs_file, "--max-retries", "2") == 130
    assert client.jobs.create_or_update.call_count == 1
    assert "interrupted" in capsys.readouterr().err


def test_max_retries_takes_whole_numbers(ml_client, outputs_file, capsys):
    with pytest.raises(SystemExit):
        submit(outputs_file, "--max-retries", "-1")
    assert "expected a whole number of 0 or more" in capsys.readouterr().err


FAULT_LOGS = __import__("pathlib").Path(__file__).parent / "data" / "faults"  # README.md there


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        ("ecc_uncorrectable.log", "a GPU had an uncorrectable ECC memory error"),
        ("xid79_kernel.log", "a GPU fell off the bus (Xid 79)"),
        ("nccl_ib_remote_error.log", "an NCCL network or system error"),
    ],
)
def test_a_gpu_or_fabric_fault_is_retried_though_it_ends_in_a_traceback(log, reason):
    text = (FAULT_LOGS / log).read_text()
    outcome = classify("Failed", NON_ZERO, text)
    assert outcome == Outcome(True, reason)


def test_the_users_own_cuda_error_is_not_retried():
    # The same traceback as the ECC fault's, for an error of the script's making.
    text = (FAULT_LOGS / "ecc_uncorrectable.log").read_text()
    own = text.replace("uncorrectable ECC error encountered", "device-side assert triggered")
    own = own.replace("cudaErrorECCUncorrectable", "cudaErrorAssert")
    outcome = classify("Failed", NON_ZERO, own)
    assert not outcome.retry and outcome.reason.startswith("the script raised a Python exception")


def test_a_pytorch_collective_timeout_is_retried_unless_another_ranks_own_error_caused_it():
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (WorkNCCL::checkTimeout): logPrefix(),
    # the message, the WorkNCCL and how long it ran.
    line = (
        "[rank3]:[E1126 18:52:10.204551871 ProcessGroupNCCL.cpp:688] [Rank 3] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=5121, OpType=ALLREDUCE, NumelIn=25557032, "
        "NumelOut=25557032, Timeout(ms)=600000) ran for 600046 milliseconds before timing out.\n"
    )
    assert classify("Failed", NON_ZERO, line).retry  # a rank that stopped: a lost process
    # Another rank's own error is why rank 3 waited: not retried (no exit records here; with
    # them, tests/jobs/test_verdicts.py).
    outcome = classify("Failed", NON_ZERO, TRACEBACK + line)
    assert not outcome.retry and outcome.reason.startswith("the script raised a Python exception")

"""`azdl submit` right after `pulumi up`: Azure ML refuses with 403 while the operator's new
role assignments propagate (up to 10 minutes: Troubleshoot Azure RBAC, ms.date 2025-12-11);
azdl says so, waits and submits once it is let in. The storage side of the same retry runs
against azure-storage-blob's own client in tests/azure/test_propagation.py, the code upload of
`--script` through azure-ai-ml's own MLClient in tests/azure/test_code_upload_propagation.py."""

from types import SimpleNamespace

from azure.core.exceptions import HttpResponseError

from azdl.cli import main


def forbidden() -> HttpResponseError:
    """What azure-ai-ml raises for an ARM 403 (status and ARM error code)."""
    error = HttpResponseError(message="(AuthorizationFailed) The client does not have "
                              "authorization to perform action 'Microsoft.MachineLearningServices/"
                              "workspaces/jobs/write'")  # fmt: skip
    error.status_code, error.error_code = 403, "AuthorizationFailed"
    return error


def test_submit_waits_out_a_403_and_says_why(ml_client, outputs_file, capsys, mocker):
    slept = []
    mocker.patch("azdl.propagation.time.sleep", side_effect=slept.append)
    answers = [forbidden(), forbidden()]

    def create(job):
        if answers:
            raise answers.pop()
        return SimpleNamespace(
            name=job.name, studio_url=f"https://ml.azure.com/runs/{job.name}", status="Starting"
        )

    ml_client.return_value.jobs.create_or_update.side_effect = create
    code = main(["submit", "--outputs", str(outputs_file()), "--nodes", "1", "--name", "r1",
                 "--storage", "synthetic"])  # fmt: skip
    assert code == 0
    assert ml_client.return_value.jobs.create_or_update.call_count == 3 and len(slept) == 2
    captured = capsys.readouterr()
    assert "submitted r1" in captured.out
    assert captured.err.count("Azure answered 403 (AuthorizationFailed)") == 1
    assert "can take up to 10 minutes to take effect" in captured.err

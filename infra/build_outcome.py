"""What `pulumi up` makes of an image build in ACR Tasks (infra/images.py): the pushed image
when the run succeeded, else one message naming the run's log and the one command that
recovers.

A build can fail in two ways that reach the user differently (pulumi-azure-native, commit
006a62afe453b416e5d5c98d2d91c4c7281f52f9):
- the run ends without its image, and the TaskRun's long-running PUT still succeeds: the run's
  result (`runResult`) comes back as the resource's output, and `built_ref` stops `up`;
- the PUT's operation itself fails: `putOrPatch` (provider/pkg/azure/client_azcore.go) returns
  the error with `created` true, `Create` (provider/pkg/provider/provider.go) hands it to
  `HandleErrorWithCheckpoint` (provider/pkg/provider/crud/crud.go), which reads the resource
  back and returns `ErrorResourceInitFailed` with that partial state. The engine then records
  the run with an initialization error and fails the step; the program never sees `runResult`,
  so the TaskRun's error hook (`run_error_hook`) says what `built_ref` would have.
A TaskRun that the PUT created before `up` was stopped is a third case: Pulumi keeps a pending
create, and the next `up` fails in the provider's `CanCreate` ("cannot create already existing
resource", client_azcore.go), because the run's name is fixed.

Error hooks see every provider error from Pulumi CLI 3.244.0 on (before it, only partial
failures: pulumi/pulumi#23347; azdl/pulumi_cli.py checks the CLI's version).
"""

import re
from collections.abc import Mapping
from typing import Any

import pulumi

SUCCEEDED = "Succeeded"
# RunStatus values of a run that ended without an image (ARM spec, containerregistry tasks).
FAILED_RUN = ("Failed", "Canceled", "Error", "Timeout")
TASKS_REFUSED = "TasksOperationsNotAllowed"
TASKS_REFUSED_MESSAGE = (
    "error: this subscription refuses ACR Tasks (TasksOperationsNotAllowed; free-trial "
    "subscriptions do), so azdl cannot build the training images here. Build them elsewhere "
    "and name them in azdl:images.prebuilt (docs/images.md, Prebuilt images), or deploy to a "
    "subscription that allows ACR Tasks."
)
# pulumi-azure-native's CanCreate (client_azcore.go) for a resource Azure already has.
ALREADY_EXISTS = "cannot create already existing resource"
_RESOURCE_ID = re.compile(r"'(/subscriptions/[^']+)'")


class BuildFailed(pulumi.RunError):
    """An image build that left no image: the message names its log and the recovery (a
    RunError: Pulumi prints the message alone, without a traceback)."""


def registry_of(login_server: str) -> str:
    return login_server.split(".", 1)[0]


def rebuild_command(upload_urn: str) -> str:
    return (
        f"build it again with `pulumi up --replace '{upload_urn}'` (a new upload of the build "
        "context and a new run; nothing else changes)"
    )


def built_ref(
    login_server: str,
    run_result: Mapping[str, Any] | None,
    tag_ref: str,
    upload_urn: str,
    preview: bool,
) -> str:
    """The pushed image as `<registry>/<repository>:<tag>@<digest>` from a TaskRun's result.
    A run that ended without its image raises BuildFailed, naming the run's log and the command
    that recovers; so, outside a preview (where the run has not happened and the tag ref stands
    in), does anything but a run that Succeeded and reports the image. Pulumi returns a TaskRun
    only once its operation has ended (pulumi-azure-native polls it to the end: client_azcore.go
    `putOrPatch`; while a run builds, its operation's status stays "Creating",
    pulumi/pulumi-azure-native#1713), so a run still queued or running is not one to register
    as built."""
    result = run_result or {}
    status, run_id = result.get("status"), result.get("run_id") or result.get("runId")
    if status == SUCCEEDED:
        for image in result.get("output_images") or result.get("outputImages") or []:
            if f"{image.get('repository')}:{image.get('tag')}" == tag_ref.split("/", 1)[1]:
                return f"{tag_ref}@{image['digest']}"
    log = f"`az acr task logs -r {registry_of(login_server)} --run-id {run_id}`"
    if status in FAILED_RUN:
        raise BuildFailed(
            f"the ACR Tasks build of {tag_ref} ended {status}: see its log with {log}; once "
            f"the cause is fixed, {rebuild_command(upload_urn)}"
        )
    if preview:
        return tag_ref
    if status == SUCCEEDED:
        raise BuildFailed(
            f"the ACR Tasks run {run_id} of {tag_ref} Succeeded but reports no such image "
            f"pushed: see its log with {log}; then {rebuild_command(upload_urn)}"
        )
    if status is None:
        raise BuildFailed(
            f"the ACR Tasks run of {tag_ref} reports no result: {rebuild_command(upload_urn)}"
        )
    raise BuildFailed(
        f"the ACR Tasks run {run_id} of {tag_ref} is still {status}, yet Azure answered its "
        f"TaskRun as done: follow it with {log}; once it has ended, `pulumi refresh` reads its "
        "result, and `pulumi up` goes on from there"
    )


def explain_refused_tasks(args: pulumi.ErrorHookArgs) -> bool:
    """Error hook of the task: when Azure refused ACR Tasks, says what to do instead. Never
    retries (a refusal does not pass)."""
    if any(TASKS_REFUSED in error for error in args.errors):
        pulumi.log.error(TASKS_REFUSED_MESSAGE)
    return False


def run_error_advice(args: pulumi.ErrorHookArgs, upload_urn: str) -> str | None:
    """The line the TaskRun's error hook prints for a failed create or update (newest error
    first, as the engine passes them): the refusal of ACR Tasks, a run left in Azure by an
    interrupted `up`, or a build that failed; None for a failed delete (no build is involved)."""
    if args.failed_operation == "delete":
        return None
    latest = args.errors[0] if args.errors else ""
    if any(TASKS_REFUSED in error for error in args.errors):
        return TASKS_REFUSED_MESSAGE
    inputs = args.new_inputs or {}
    registry, run = inputs.get("registryName", "<registry>"), inputs.get("taskRunName", args.name)
    if ALREADY_EXISTS in latest:
        found = _RESOURCE_ID.search(latest)
        run_id = found.group(1) if found else "<the resource id in the error above>"
        return (
            f"error: the ACR Tasks run {run} already exists in registry {registry}, but this "
            "stack's state lacks it (an earlier `pulumi up` was stopped while it built): take "
            f"it into the state with `pulumi refresh --import-pending-creates '{args.urn}' "
            f"--import-pending-creates '{run_id}'`, then run `pulumi up` again"
        )
    return (
        f"error: the ACR Tasks run {run} failed in Azure: see its log with `az acr taskrun logs "
        f"-r {registry} -n {run}`; once the cause is fixed, {rebuild_command(upload_urn)}"
    )


def run_error_hook(framework: str, upload: pulumi.Resource) -> pulumi.ErrorHook:
    """The error hook of `framework`'s TaskRun: prints `run_error_advice`, naming `upload` (the
    build context's upload) in the command that builds again. Never retries: the same request
    fails the same way."""

    async def explain(args: pulumi.ErrorHookArgs) -> bool:
        advice = run_error_advice(args, await upload.urn.future())
        if advice:
            pulumi.log.error(advice)
        return False

    return pulumi.ErrorHook(f"azdl-{framework}-build-failed", explain)

"""A failed image build as pulumi-azure-native reports it: the TaskRun's operation fails after
Azure accepted its PUT (a partial failure, `HandleErrorWithCheckpoint`), or its create is
refused because an interrupted `up` left the run in Azure (`CanCreate`). Neither reaches
`built_ref`; the TaskRun's error hook names the run's log and the one command that recovers
(infra/build_outcome.py). The provider's errors and the engine's way of calling the hooks are
tests/infra/provider_failure.py's, which the mock engine does not model yet: here a subclass of
its monitor and mocks wires it in for the two runs."""

import re
from pathlib import Path

import pulumi
import pytest

import tests.support.mock_engine.recorder as recorder
from infra import build_outcome
from infra.config import read_stack_file
from tests.infra.provider_failure import (
    ErrorHooks,
    OperationFailed,
    already_exists,
    create_with_hooks,
    operation_error,
)
from tests.support import mock_engine as mocks

DEV = Path(__file__).resolve().parents[2] / "stacks" / "Pulumi.dev.yaml"
TASK_RUN = "azure-native:containerregistry:TaskRun"
REGISTRY = "azure-native:resources:Resource"
# ACR's error body for a run whose operation failed was not observed; the hook does not read it.
RUN_FAILED = operation_error(200, "", "the run failed")


class _HookingMonitor(recorder._RecordingMonitor):
    """The recording monitor, also keeping what the engine keeps: each error hook's callback,
    and the `on_error` hooks of the resource being registered."""

    def RegisterErrorHook(self, request):
        self.mocks.hooks.register(request)
        return super().RegisterErrorHook(request)

    def RegisterResource(self, request):
        self.mocks._local.on_error = list(request.hooks.on_error)
        return super().RegisterResource(request)


class FailingRuns(mocks.AzureMocks):
    """`pulumi up` in which the TaskRuns named in `failures` fail as the provider reports it
    (`failures[name](args, answer)` -> OperationFailed), through the engine's error hooks."""

    def __init__(self, failures, **options):
        super().__init__(**options)
        self.failures, self.hooks = failures, ErrorHooks()

    def new_resource(self, args):
        if args.typ != TASK_RUN or args.name not in self.failures:
            return super().new_resource(args)

        def create():
            rid, state = self._answer(args.typ, args.name, dict(args.inputs))
            raise self.failures[args.name](rid, state)

        return create_with_hooks(create, self.hooks, self._local.on_error, urn=self._local.urn,
                                 name=args.name, typ=args.typ, inputs=args.inputs)  # fmt: skip


@pytest.fixture
def said(monkeypatch):
    lines = []
    monkeypatch.setattr(pulumi.log, "error", lambda message, *a, **k: lines.append(message))
    monkeypatch.setattr(recorder, "_RecordingMonitor", _HookingMonitor)
    return lines


def _render_failing(failures):
    """Render the dev stack with `failures`; (the line each failing run said, the registry's
    name, the build contexts' URNs). One failure per render: the engine ends `up` at the first
    failed step, so a second run's step may or may not have started (its order is the
    scheduler's), as in a real `pulumi up`."""
    status = {name: "Failed" for name in failures}  # the other run builds
    engine = FailingRuns(failures, run_status=lambda name, _state: status.get(name, "Succeeded"))
    with pytest.raises(OperationFailed):
        mocks.render(read_stack_file(DEV), "dev", mocks=engine)
    uploads = {r.name: r.urn for r in engine.resources if r.type == mocks.DYNAMIC}
    (registry,) = [r.inputs["resourceName"] for r in engine.resources if r.type == REGISTRY]
    return registry, uploads


@pytest.mark.slow  # renders the dev stack (seconds)
def test_a_failed_run_names_its_log_and_the_recovery(said):
    # the run's operation fails: Azure has the run, the provider reads it back
    failed = {"tensorflow-build": lambda rid, state: OperationFailed(RUN_FAILED, rid, state)}
    registry, uploads = _render_failing(failed)
    (line,) = said
    assert "ACR Tasks run azdl-tensorflow" in line
    assert f"`az acr taskrun logs -r {registry} -n azdl-tensorflow`" in line
    assert f"`pulumi up --replace '{uploads['tensorflow-context']}'`" in line


@pytest.mark.slow  # renders the dev stack (seconds)
def test_a_run_left_in_azure_names_the_pending_create_to_import(said):
    # an interrupted `up` left the run in Azure: refused before any PUT
    left = {"pytorch-build": lambda rid, _state: OperationFailed(already_exists(rid))}
    registry, _ = _render_failing(left)
    (line,) = said
    assert "ACR Tasks run azdl-pytorch" in line
    run_urn = re.search(r"--import-pending-creates '(urn:[^']+)'", line).group(1)
    assert run_urn.endswith("containerregistry:TaskRun::pytorch-build")
    run_id = re.search(r"--import-pending-creates '(/subscriptions/[^']+)'", line).group(1)
    assert run_id.endswith(f"/registries/{registry}/taskRuns/azdl-pytorch")


def _args(errors, operation="create"):
    inputs = {"registryName": "azdldevacr", "taskRunName": "azdl-tensorflow"}
    return pulumi.ErrorHookArgs("urn:run", "", "tensorflow-build", TASK_RUN, new_inputs=inputs,
                                failed_operation=operation, errors=errors)  # fmt: skip


def test_the_advice_follows_the_newest_error():
    refused = build_outcome.TASKS_REFUSED
    assert build_outcome.run_error_advice(_args([f"... {refused} ..."]), "urn:up") == (
        build_outcome.TASKS_REFUSED_MESSAGE
    )
    exists = already_exists("/subscriptions/s/x/taskRuns/azdl-tensorflow")
    assert "--import-pending-creates" in build_outcome.run_error_advice(_args([exists]), "u")
    # retried once into a different error: the newest one decides
    advice = build_outcome.run_error_advice(_args([RUN_FAILED, exists]), "urn:up")
    assert "az acr taskrun logs -r azdldevacr -n azdl-tensorflow" in advice
    assert "pulumi up --replace 'urn:up'" in advice
    assert build_outcome.run_error_advice(_args([RUN_FAILED], "delete"), "urn:up") is None

"""The manifest format, the engine-value conversion, and bad input before anything renders."""

import json
import subprocess
import sys

import pytest
from google.protobuf import struct_pb2
from pulumi.runtime.proto import resource_pb2

from azdl.cli import main
from azdl.envs import PACKAGES_ROOT
from azdl.errors import AzdlError
from azdl.review import manifest
from azdl.review.plan import (
    check_stack_file,
    known_stacks,
    load_plans,
    stack_file,
)
from azdl.review.render import plain, redact_config, resource_entry
from azdl.review.render_cache import CONFIG_ERROR_EXIT
from tests.review.builders import plan, storage

STACK = "urn:pulumi:dev::azdl::pulumi:pulumi:Stack"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SECRET = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "pw"}


def test_keys_drop_stack_and_project_so_stacks_compare():
    dev = f"{STACK}$azdl:infra:Storage$azure-native:storage:StorageAccount::data"
    prod = dev.replace(":dev::", ":prod::")
    assert manifest.key_of_urn(dev) == manifest.key_of_urn(prod)
    assert (
        manifest.key_of_urn(dev) == "azdl:infra:Storage$azure-native:storage:StorageAccount::data"
    )
    with pytest.raises(ValueError, match="not a Pulumi URN"):
        manifest.key_of_urn("data")


def test_dumps_is_canonical():
    a = {"b": 1, "a": {"y": 2, "x": [3, {"d": 4, "c": 5}]}}
    b = {"a": {"x": [3, {"c": 5, "d": 4}], "y": 2}, "b": 1}
    assert manifest.dumps(a) == manifest.dumps(b)
    assert manifest.dumps(a).endswith("}\n")


def test_plain_marks_unknowns_redacts_secrets_and_relativises_repo_paths():
    sources = ["azure-native:network:Subnet::training-subnet"]
    assert plain(UNKNOWN, sources) == {"$unknown": sources}
    assert plain({"id": UNKNOWN}, sources) == {"id": {"$unknown": sources}}
    assert plain(SECRET, sources) == manifest.SECRET
    assert plain(f"{PACKAGES_ROOT}/images/Dockerfile", []) == "./images/Dockerfile"
    assert plain(4.0, []) == 4 and isinstance(plain(4.0, []), int)
    assert plain(0.5, []) == 0.5


def test_plain_records_assets_and_archives_as_the_sdk_serializes_them():
    """The engine values come from the SDK's own serializer, not from copied signatures."""
    from pulumi import FileArchive, FileAsset
    from pulumi.runtime.rpc import serialize_property
    from pulumi.runtime.sync_await import _sync_await

    for value in (
        FileAsset(f"{PACKAGES_ROOT}/images/Dockerfile"),
        FileArchive(f"{PACKAGES_ROOT}/images"),
    ):
        engine = _sync_await(serialize_property(value, [], None))
        assert plain(engine, []) == {"$asset": "./" + value.path[len(f"{PACKAGES_ROOT}/") :]}


def test_resource_entry_records_what_the_engine_sees():
    obj = struct_pb2.Struct()
    obj.update({"scope": UNKNOWN, "description": SECRET, "maxNodeCount": 4.0})
    parent = f"{STACK}$azdl:infra:Cluster::cluster"
    identity = f"{STACK}$azdl:infra:Cluster$azure-native:managedidentity:UserAssignedIdentity::id"
    request = resource_pb2.RegisterResourceRequest(
        type="azure-native:authorization:RoleAssignment",
        name="read",
        parent=parent,
        custom=True,
        object=obj,
        dependencies=[identity],
        propertyDependencies={
            "scope": resource_pb2.RegisterResourceRequest.PropertyDependencies(urns=[identity])
        },
        protect=True,
        ignoreChanges=["tags"],
    )
    urn = f"{STACK}$azdl:infra:Cluster$azure-native:authorization:RoleAssignment::read"
    entry = resource_entry(urn, request)
    id_key = manifest.key_of_urn(identity)
    assert entry == {
        "key": "azdl:infra:Cluster$azure-native:authorization:RoleAssignment::read",
        "type": "azure-native:authorization:RoleAssignment",
        "name": "read",
        "custom": True,
        "parent": "azdl:infra:Cluster::cluster",
        "dependsOn": [id_key],
        "protect": True,
        "retainOnDelete": False,
        "ignoreChanges": ["tags"],
        "replaceOnChanges": [],
        "deleteBeforeReplace": False,
        "inputs": {"description": "[secret]", "maxNodeCount": 4, "scope": {"$unknown": [id_key]}},
    }


def test_stack_config_secrets_are_redacted():
    config = {"azdl:tags": {"owner": "me"}, "azdl:token": {"secure": "v1:abc"}}
    assert redact_config(config) == {"azdl:tags": {"owner": "me"}, "azdl:token": "[secret]"}


def test_unknown_stack_lists_the_known_ones(tmp_path):
    """Those in the stacks folder, whatever it holds (a stack file a user added too)."""
    assert {"dev", "prod"} <= set(known_stacks())
    for stack in ("prod", "dev", "mine"):
        (tmp_path / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
    known = r"unknown stack 'staging'; known stacks .*: dev, mine, prod$"
    with pytest.raises(AzdlError, match=known):
        stack_file("staging", tmp_path)


def test_malformed_stack_file(tmp_path):
    bad = tmp_path / "Pulumi.broken.yaml"
    bad.write_text("config:\n  azdl:environment: [dev\n")
    with pytest.raises(AzdlError, match="malformed stack file \\(not valid YAML\\)"):
        check_stack_file(bad)
    bad.write_text("- just\n- a list\n")
    with pytest.raises(AzdlError, match="expected a mapping with a `config:` map"):
        check_stack_file(bad)


def test_invalid_config_reports_the_programs_own_config_error(tmp_path):
    text = (PACKAGES_ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    broken = tmp_path / "Pulumi.dev.yaml"
    broken.write_text(text.replace("vmSize: Standard_NC24ads_A100_v4", "vmSize: Standard_NC24r"))
    with pytest.raises(AzdlError) as info:
        check_stack_file(broken)
    message = str(info.value)
    assert "invalid stack config: azdl:cluster.vmSize = 'Standard_NC24r' is invalid" in message
    assert "Standard_ND96isr_H100_v5" in message  # names what is allowed
    assert "Traceback" not in message


def test_manifest_of_another_format_and_broken_files(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps(plan(storage()) | {"format": "azdl.plan/v2"}))
    with pytest.raises(AzdlError, match=r"manifest format 'azdl\.plan/v2' is not supported"):
        load_plans([str(other)])
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    with pytest.raises(AzdlError, match="not valid JSON"):
        load_plans([str(garbage)])
    with pytest.raises(AzdlError, match="no such manifest file"):
        load_plans([str(tmp_path / "missing.json")])
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"format": manifest.FORMAT, "stack": "dev"}))
    with pytest.raises(AzdlError, match="manifest lacks project, config, resources, outputs"):
        load_plans([str(partial)])


def test_a_stack_name_that_is_no_file_is_looked_up_as_a_stack(capsys):
    assert main(["diff", "dev", "qa"]) == 2
    assert "unknown stack 'qa'; known stacks" in capsys.readouterr().err


def test_a_bare_name_is_a_stack_even_with_a_file_of_that_name_here(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # outside the project: it is named
    (tmp_path / "qa").write_text(manifest.dumps(plan(storage())))
    assert main(["--project-dir", str(PACKAGES_ROOT), "diff", "qa", "qa"]) == 2
    assert "unknown stack 'qa'; known stacks" in capsys.readouterr().err
    assert main(["diff", "./qa", "./qa"]) == 0  # with a folder it is a file


@pytest.mark.slow
def test_renderer_reports_the_programs_config_error_without_a_traceback(tmp_path):
    """The path `azdl plan` takes if the program itself rejects a config (exit code 3)."""
    text = (PACKAGES_ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    broken = tmp_path / "Pulumi.dev.yaml"
    broken.write_text(text.replace("maxNodes: 2", "maxNodes: 0"))
    result = subprocess.run(
        [sys.executable, "-m", "azdl.review.render_cache", str(broken), str(tmp_path / "in"),
         str(PACKAGES_ROOT / "infra")],
        cwd=PACKAGES_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == CONFIG_ERROR_EXIT
    assert result.stderr.strip() == "azdl:cluster.maxNodes = 0 is invalid: at least 1"
    assert result.stdout == "" and not (tmp_path / "in").exists()


def test_policy_pack_imports_with_only_its_own_folder_on_the_path():
    """Pulumi runs the pack's __main__.py with the pack folder as sys.path[0]."""
    code = "import sys; sys.path[0] = 'policies'; import rules; print(len(rules.POLICIES))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=PACKAGES_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "26"
    main_py = (PACKAGES_ROOT / "policies" / "__main__.py").read_text()
    assert "from rules import POLICIES" in main_py and "PolicyPack(" in main_py

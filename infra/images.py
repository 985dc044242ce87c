"""Images: the GPU training images, built in Azure by ACR Tasks and registered in Azure ML.

Each framework's image (`images/<framework>/Dockerfile`) builds from one context: its own folder
with the repository's `training/` folder inside (infra/build_context.py). The tag is a hash of
exactly what that context holds, so the same content gives the same tag and no rebuild, and a
job always runs the code of the commit that deployed it.

Nothing is built on the deploying machine, and it never talks to the stack's registry or
storage (prod's answer only inside the VNet). For each image `pulumi up`:
- asks the registry's control plane for a source upload URL (`listBuildSourceUploadUrl`, on
  management.azure.com), and uploads the context there only when its hash changed
  (`SourceUpload`: storage that ACR Tasks owns, the path `az acr build` takes);
- declares an ACR Tasks run (`TaskRun`, a DockerBuildRequest) that builds the context on
  Microsoft-hosted agents and pushes `<registry>/azdl/<framework>:<hash>`. A registry with
  public network access disabled admits those agents because it sets
  `networkRuleBypassAllowedForTasks` (infra/registry.py). The base images and packages come
  from the internet on ACR's agents, not through the stack's VNet.
A preview uploads and builds nothing. Docker on the deployer's machine is optional: the same
context builds locally with `python -m infra.build_context <framework> | docker build -`.

Every image becomes an Azure ML environment version (name `azdl-<framework>`, version = the
content hash); the component's `images` (framework -> image ref with digest) and
`environments` (framework -> environment version id) are the stack outputs of the same names.
Frameworks named in `azdl:images.prebuilt` are registered as given and not built.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_azure_native import containerregistry, machinelearningservices

from infra.build_context import SourceUpload, content_hash
from infra.config import IMAGE_FRAMEWORKS as FRAMEWORKS
from infra.config import StackConfig

# A CUDA image with Horovod compiled from source can take longer than ACR Tasks' default run
# timeout of 3600 s (DockerBuildRequest.timeout's default in the ARM spec and the SDK).
BUILD_TIMEOUT_SECONDS = 3 * 3600
# RunStatus values of a run that ended without an image (ARM spec, containerregistry tasks).
FAILED_RUN = ("Failed", "Canceled", "Error", "Timeout")


def built_ref(login_server: str, run_result: Mapping[str, Any] | None, tag_ref: str) -> str:
    """The pushed image as `<registry>/<repository>:<tag>@<digest>` from a TaskRun's result;
    raises, naming the run, when the run failed; the tag ref while the run has not reported
    its image yet."""
    result = run_result or {}
    status, run_id = result.get("status"), result.get("run_id") or result.get("runId")
    if status in FAILED_RUN:
        registry = login_server.split(".", 1)[0]
        raise RuntimeError(
            f"the ACR Tasks build of {tag_ref} ended {status}: see its log with "
            f"`az acr task logs -r {registry} --run-id {run_id}`"
        )
    images = result.get("output_images") or result.get("outputImages") or []
    for image in images:
        if f"{image.get('repository')}:{image.get('tag')}" == tag_ref.split("/", 1)[1]:
            return f"{tag_ref}@{image['digest']}"
    return tag_ref


@dataclass
class TrainingImagesArgs:
    config: StackConfig
    resource_group_name: pulumi.Input[str]
    workspace_name: pulumi.Input[str]
    # An output of the registry resource: the upload URL is asked for once the registry exists.
    registry_name: pulumi.Input[str]
    registry_login_server: pulumi.Input[str]
    # framework -> prebuilt image ref; frameworks named here are registered, not built
    prebuilt: Mapping[str, str] = field(default_factory=dict)


class TrainingImages(pulumi.ComponentResource):
    images: dict[str, pulumi.Output[str]]
    environments: dict[str, pulumi.Output[str]]

    def __init__(
        self, name: str, args: TrainingImagesArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("azdl:infra:TrainingImages", name, None, opts)
        self.images, self.environments = {}, {}

        # Environment versions are immutable in Azure ML, so a version must name one image
        # for good: it registers a ref that is fixed together with the version string. For a
        # built image that is the tag (the version is its content hash), not the pushed ref
        # with digest: rebuilding the same content (a re-created registry) pushes a new
        # digest under the same tag, and registering digests would then ask Azure to change
        # an existing version. Same tag, same content; the `images` output carries the digest
        # of the latest build. A prebuilt ref is registered as given, versioned by its own hash.
        for framework in FRAMEWORKS:
            if framework in args.prebuilt:
                registered = pulumi.Output.from_input(args.prebuilt[framework])
                version = hashlib.sha256(args.prebuilt[framework].encode()).hexdigest()[:16]
                self.images[framework], built = registered, []
            else:
                version = content_hash(framework)
                registered = pulumi.Output.concat(
                    args.registry_login_server, "/azdl/", framework, ":", version
                )
                run = self._build(framework, version, args)
                self.images[framework] = pulumi.Output.all(
                    args.registry_login_server, run.run_result, registered
                ).apply(lambda a: built_ref(*a))
                built = [run]
            self.environments[framework] = self._environment(
                framework, version, registered, args, built
            )

        self.register_outputs({"images": self.images, "environments": self.environments})

    def _build(
        self, framework: str, version: str, args: TrainingImagesArgs
    ) -> containerregistry.TaskRun:
        """Upload the framework's context (when its hash changed) and have ACR Tasks build it
        and push `azdl/<framework>:<version>` (TaskRun, API 2019-06-01-preview in
        pulumi-azure-native 3.29)."""
        child = pulumi.ResourceOptions(parent=self)
        source = containerregistry.list_registry_build_source_upload_url_output(
            registry_name=args.registry_name, resource_group_name=args.resource_group_name
        )
        # The URL is the registry's: recorded as a dependency on it (an invoke's result
        # carries none), so plans and waves show the upload after the registry.
        of_registry = pulumi.Output.all(args.registry_name, source.upload_url, source.relative_path)
        upload = SourceUpload(
            f"{framework}-context",
            framework,
            of_registry.apply(lambda a: a[1]),
            of_registry.apply(lambda a: a[2]),
            child,
        )
        return containerregistry.TaskRun(
            f"{framework}-build",
            containerregistry.TaskRunArgs(
                registry_name=args.registry_name,
                resource_group_name=args.resource_group_name,
                task_run_name=f"azdl-{framework}",
                location=args.config.location,
                run_request=containerregistry.DockerBuildRequestArgs(
                    type="DockerBuildRequest",
                    source_location=upload.relative_path,
                    docker_file_path="Dockerfile",
                    image_names=[f"azdl/{framework}:{version}"],
                    is_push_enabled=True,
                    platform=containerregistry.PlatformPropertiesArgs(
                        os="Linux", architecture="amd64"
                    ),
                    timeout=BUILD_TIMEOUT_SECONDS,
                ),
            ),
            child,
        )

    def _environment(
        self,
        framework: str,
        version: str,
        ref: pulumi.Output[str],
        args: TrainingImagesArgs,
        built: list[pulumi.Resource],
    ) -> pulumi.Output[str]:
        """Register `ref` as version `version` of the Azure ML environment `azdl-<framework>`,
        once it is `built` (the build run of a built image; nothing for a prebuilt one)."""
        env_name = f"azdl-{framework}"
        container = machinelearningservices.EnvironmentContainer(
            f"{framework}-environment",
            machinelearningservices.EnvironmentContainerArgs(
                name=env_name,
                resource_group_name=args.resource_group_name,
                workspace_name=args.workspace_name,
                properties=machinelearningservices.EnvironmentContainerPropertiesArgs(
                    description=f"azdl {framework} GPU training images (Horovod, NCCL, MPI)",
                    tags=dict(args.config.tags),
                ),
            ),
            pulumi.ResourceOptions(parent=self),
        )
        env = machinelearningservices.EnvironmentVersion(
            f"{framework}-environment-version",
            machinelearningservices.EnvironmentVersionArgs(
                name=env_name,
                version=version,
                resource_group_name=args.resource_group_name,
                workspace_name=args.workspace_name,
                properties=machinelearningservices.EnvironmentVersionPropertiesArgs(
                    image=ref,
                    os_type="Linux",
                    description=f"azdl {framework} image {version}",
                    tags=dict(args.config.tags),
                ),
            ),
            pulumi.ResourceOptions(parent=self, depends_on=[container, *built]),
        )
        return env.id

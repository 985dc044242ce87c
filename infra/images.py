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
- declares an ACR Task with a system-assigned identity that builds the context on
  Microsoft-hosted agents and pushes `<registry>/azdl/<framework>:<hash>`, gives that identity
  AcrPush on the registry, and runs the task once per upload (a `TaskRun`).

Why a task with its own identity, not a quick build: a registry with public network access
disabled admits ACR Tasks' agents through `networkRuleBypassAllowedForTasks`
(infra/registry.py) only for runs that authenticate with the task's own system-assigned
identity ("Manage network bypass policy for tasks", learn.microsoft.com/azure/
container-registry/manage-network-bypass-policy-for-tasks, ms.date 2025-05-15). Microsoft's
Azure Landing Zones bootstrap module builds into its private registry this way
(Azure/accelerator-bootstrap-modules, modules/azure/container_registry.tf, commit 06e612c:
`identity { type = "SystemAssigned" }`, `registry_credential { custom { login_server,
identity = "[system]" } }`, AcrPush for the task's principal, a run that waits for that role).
The registry credential is the only place the identity can be named: the source-registry
credential takes a login mode only (ARM spec containerregistry_build.json 2019-06-01-preview,
`SourceRegistryCredentials.loginMode`, `CustomRegistryCredentials.identity`). The same design
serves dev, whose registry is public: one way to build.

The run is tied to its upload (its `forceUpdateTag` is the upload's path) and both, with the
task, to the registry (`replace_with`): a replaced registry gets a new upload, task and run, so
its images are built again. Every way a build can fail ends `up` with the run's log command and
the one command that recovers (infra/build_outcome.py): a run that ended without its image (the
image ref refuses anything but Succeeded outside a preview), a run whose operation failed (the
TaskRun's error hook; Pulumi records the run with an initialization error, and it is replaced
on the next `up`: `replace_on_changes=["*"]`, pulumi/pulumi pkg/resource/deploy/
step_generator.go, `applyReplaceOnChanges`), and a run an interrupted `up` left in Azure.
Pulumi waits for the run longer than the build may take (`custom_timeouts`; azure-native's own
default is 2 h, provider.go `azureContext`): a CI job that runs `up` needs a longer timeout
still (docs/deploy.md). A subscription that refuses ACR Tasks (free trials:
TasksOperationsNotAllowed) gets one message naming `azdl:images.prebuilt`. A preview uploads
and builds nothing. Docker on the deployer's machine is optional: the same context builds
locally with `python -m infra.build_context <framework> | docker build -`.

Every image becomes an Azure ML environment version (name `azdl-<framework>`, version = the
content hash); the component's `images` (framework -> image ref with digest) and
`environments` (framework -> environment version id) are the stack outputs of the same names.
Frameworks named in `azdl:images.prebuilt` are registered as given and not built.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
from pulumi_azure_native import containerregistry, machinelearningservices

from infra.build_context import SourceUpload, content_hash
from infra.build_outcome import built_ref, explain_refused_tasks, run_error_hook
from infra.config import IMAGE_FRAMEWORKS as FRAMEWORKS
from infra.config import StackConfig
from infra.registry import Registry
from infra.role_assignments import assign_role

# A CUDA image with Horovod compiled from source can take longer than ACR Tasks' default run
# timeout of 3600 s (the task's `timeout`: default 3600, 300 to 28800, ARM spec 2019-06-01-preview).
BUILD_TIMEOUT_SECONDS = 3 * 3600
# How long Pulumi waits for a run: the build's own limit plus half an hour of queueing.
RUN_WAIT = f"{BUILD_TIMEOUT_SECONDS // 60 + 30}m"
# The registry credential that names the task's own system-assigned identity (the Landing
# Zones module and `az acr task credential add --use-identity [system]`; the spec's
# description spells it `system`).
SYSTEM_IDENTITY = "[system]"


@dataclass
class TrainingImagesArgs:
    config: StackConfig
    resource_group_name: pulumi.Input[str]
    workspace_name: pulumi.Input[str]
    registry: Registry  # the stack's registry: built into, pulled from
    subscription_id: pulumi.Input[str]
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
        # Azure's registry confirms the name first (infra/registry.py): builds, image refs and
        # environments wait for it.
        login_server = args.registry.confirmed_login_server
        built_frameworks = [f for f in FRAMEWORKS if f not in args.prebuilt]
        refused = (
            pulumi.ErrorHook("azdl-acr-tasks-refused", explain_refused_tasks)
            if built_frameworks
            else None
        )

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
                registered = pulumi.Output.concat(login_server, "/azdl/", framework, ":", version)
                upload, run = self._build(framework, version, args, refused)
                preview = pulumi.runtime.is_dry_run()
                self.images[framework] = pulumi.Output.all(
                    login_server, run.run_result, registered, upload.urn
                ).apply(lambda a, preview=preview: built_ref(*a, preview=preview))
                built = [run]
            self.environments[framework] = self._environment(
                framework, version, registered, args, built
            )

        self.register_outputs({"images": self.images, "environments": self.environments})

    def _build(
        self,
        framework: str,
        version: str,
        args: TrainingImagesArgs,
        refused: pulumi.ErrorHook,
    ) -> tuple[SourceUpload, containerregistry.TaskRun]:
        """Upload the framework's context (when its hash changed); declare the task that
        builds it and pushes `azdl/<framework>:<version>` with its own identity, that
        identity's AcrPush, and the run of the task for this upload (Task and TaskRun: API
        2019-06-01-preview in pulumi-azure-native 3.29)."""
        cfg, registry = args.config, args.registry
        # Replaced with the registry: a new registry gets a new upload, task and run.
        of_registry = pulumi.ResourceOptions(parent=self, replace_with=[registry.registry])
        source = containerregistry.list_registry_build_source_upload_url_output(
            registry_name=registry.name, resource_group_name=args.resource_group_name
        )
        # The URL is the registry's: recorded as a dependency on it (an invoke's result
        # carries none), so plans and waves show the upload after the registry.
        located = pulumi.Output.all(registry.name, source.upload_url, source.relative_path)
        upload = SourceUpload(
            f"{framework}-context",
            framework,
            located.apply(lambda a: a[1]),
            located.apply(lambda a: a[2]),
            of_registry,
        )
        task = containerregistry.Task(
            f"{framework}-task",
            containerregistry.TaskArgs(
                registry_name=registry.name,
                resource_group_name=args.resource_group_name,
                task_name=f"azdl-{framework}",
                location=cfg.location,
                identity=containerregistry.IdentityPropertiesArgs(type="SystemAssigned"),
                platform=containerregistry.PlatformPropertiesArgs(os="Linux", architecture="amd64"),
                step=containerregistry.DockerBuildStepArgs(
                    type="Docker",
                    context_path=upload.relative_path,
                    docker_file_path="Dockerfile",
                    image_names=[f"azdl/{framework}:{version}"],
                    is_push_enabled=True,
                ),
                credentials=containerregistry.CredentialsArgs(
                    custom_registries={
                        registry.login_server: containerregistry.CustomRegistryCredentialsArgs(
                            identity=SYSTEM_IDENTITY
                        )
                    }
                ),
                timeout=BUILD_TIMEOUT_SECONDS,
                status="Enabled",
                tags=dict(cfg.tags),
            ),
            pulumi.ResourceOptions.merge(
                of_registry,
                pulumi.ResourceOptions(hooks=pulumi.ResourceHookBinding(on_error=[refused])),
            ),
        )
        push = assign_role(
            self,
            f"{framework}-task-push",
            "AcrPush",
            task.identity.principal_id,
            "ServicePrincipal",
            registry.registry.id,
            args.subscription_id,
            f"azdl {cfg.stack}: {framework} image task, AcrPush",
        )
        run = containerregistry.TaskRun(
            f"{framework}-build",
            containerregistry.TaskRunArgs(
                registry_name=registry.name,
                resource_group_name=args.resource_group_name,
                task_run_name=f"azdl-{framework}",
                location=cfg.location,
                # One run per upload: a new upload (new content, a replaced registry, or
                # `pulumi up --replace` of the upload after a failed build) runs it again.
                force_update_tag=upload.relative_path,
                run_request=containerregistry.TaskRunRequestArgs(
                    type="TaskRunRequest",
                    # the task, once the registry's login server is confirmed: no build
                    # starts for a registry the stack misnamed
                    task_id=pulumi.Output.all(task.id, registry.confirmed_login_server).apply(
                        lambda ids: ids[0]
                    ),
                    override_task_step_properties=(
                        containerregistry.OverrideTaskStepPropertiesArgs(
                            context_path=upload.relative_path
                        )
                    ),
                ),
            ),
            pulumi.ResourceOptions.merge(
                of_registry,
                pulumi.ResourceOptions(
                    depends_on=[push],
                    custom_timeouts=pulumi.CustomTimeouts(create=RUN_WAIT, update=RUN_WAIT),
                    # The run's Azure name is fixed: a replacement must delete the old one
                    # first (azure-native refuses to create a resource that exists).
                    delete_before_replace=True,
                    replace_on_changes=["*"],
                    hooks=pulumi.ResourceHookBinding(on_error=[run_error_hook(framework, upload)]),
                ),
            ),
        )
        return upload, run

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

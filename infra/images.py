"""Images: the GPU training images, built and pushed by `pulumi up`, registered in Azure ML.

Each framework's image (`images/<framework>/Dockerfile`) is built with pulumi-docker-build from
two contexts: its own folder, and the repository's `training/` folder (the code and its pinned
requirements). The tag is a hash of exactly what those contexts send to Docker (each context's
`.dockerignore` keeps caches out of both), so the same content gives the same tag and no
rebuild, and a job always runs the code of the commit that deployed it.

Pushes authenticate with the deployer's own Azure AD identity, not the registry's admin user:
Pulumi's Azure token is exchanged for an ACR refresh token (what `az acr login` does), during
`pulumi up` only: a preview builds nothing, so it needs neither the exchange nor a network path
to the registry. The deployer needs push rights on the registry, which the Owner or Contributor
role that deploying the stack takes already grants (AcrPush otherwise). A registry without
public network access (prod) is reachable only from inside its VNet, so `pulumi up` runs on a
machine with line of sight to it, or the stack names prebuilt images
(`azdl:images.prebuilt`); those are registered as they are and nothing is built.

Every image becomes an Azure ML environment version (name `azdl-<framework>`, version = the
content hash); the component's `images` (framework -> image ref with digest) and
`environments` (framework -> environment version id) are the stack outputs of the same names.
"""

import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_docker_build as docker_build
from pulumi_azure_native import authorization, machinelearningservices

from infra.config import IMAGE_FRAMEWORKS as FRAMEWORKS
from infra.config import StackConfig
from infra.dockerignore import context_files

REPO_ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = REPO_ROOT / "images"
TRAINING_DIR = REPO_ROOT / "training"
# The user name ACR expects with an ACR refresh token obtained from an Azure AD token.
ACR_TOKEN_USER = "00000000-0000-0000-0000-000000000000"


def content_hash(framework: str) -> str:
    """Hash of what the image's build contexts send to Docker: images/<framework> and training/
    (code and requirements), minus what each context's .dockerignore excludes.

    File paths and bytes go in, in sorted order. Files that Docker would send are hashed even if
    git ignores them: they end up in the image all the same.
    """
    digest = hashlib.sha256()
    for root in (IMAGES_DIR / framework, TRAINING_DIR):
        for path in context_files(root):
            digest.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def acr_refresh_token(login_server: str, tenant_id: str, aad_token: str) -> str:
    """Exchange an Azure AD access token for an ACR refresh token (ACR's /oauth2/exchange)."""
    body = urllib.parse.urlencode(
        {
            "grant_type": "access_token",
            "service": login_server,
            "tenant": tenant_id,
            "access_token": aad_token,
        }
    ).encode()
    request = urllib.request.Request(f"https://{login_server}/oauth2/exchange", data=body)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["refresh_token"]
    except urllib.error.HTTPError as exc:
        raise RuntimeError(
            f"{login_server} refused to exchange the deployer's Azure AD token "
            f"(HTTP {exc.code}): the deploying identity needs push rights on the registry "
            "(Owner, Contributor or AcrPush)"
        ) from None
    except OSError as exc:  # URLError (DNS, refused connection), timeouts
        reason = getattr(exc, "reason", exc)
        raise RuntimeError(
            f"cannot reach the registry {login_server} to push the training images ({reason}). "
            "A registry with public network access disabled (prod) answers only inside its "
            "VNet: run `pulumi up` from a runner with network line of sight to the registry's "
            "private endpoint (in the VNet, peered, or over VPN), or build the images elsewhere "
            "and name them in the stack's azdl:images.prebuilt"
        ) from None


def push_password(login_server: str, tenant_id: str, aad_token: str) -> str | pulumi.output.Unknown:
    """The registry password for `pulumi up`; unknown in a preview, which pushes nothing
    (build_on_preview is off) and so must not need a network path to the registry."""
    if pulumi.runtime.is_dry_run():
        return pulumi.UNKNOWN
    return acr_refresh_token(login_server, tenant_id, aad_token)


def _relative(path: Path) -> str:
    """`path` relative to the working directory, so state does not depend on the checkout."""
    return os.path.relpath(path, Path.cwd())


@dataclass
class TrainingImagesArgs:
    config: StackConfig
    resource_group_name: pulumi.Input[str]
    workspace_name: pulumi.Input[str]
    tenant_id: pulumi.Input[str]
    registry_login_server: pulumi.Input[str]
    # framework -> prebuilt image ref; frameworks named here are registered, not built
    prebuilt: Mapping[str, str] = field(default_factory=dict)
    # what must exist before a push reaches the registry (a private registry's endpoint,
    # DNS zone group and VNet link: azdl/review/deploy_order.py)
    push_after: Sequence[pulumi.Resource] = ()


class TrainingImages(pulumi.ComponentResource):
    images: dict[str, pulumi.Output[str]]
    environments: dict[str, pulumi.Output[str]]

    def __init__(
        self, name: str, args: TrainingImagesArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("azdl:infra:TrainingImages", name, None, opts)
        self.images, self.environments = {}, {}

        registries = []
        if any(fw not in args.prebuilt for fw in FRAMEWORKS):
            registries = [self._registry_credentials(args)]

        # Environment versions are immutable in Azure ML, so a version must name one image
        # for good: it registers a ref that is fixed together with the version string. For a
        # built image that is the tag (the version is its content hash), not the pushed ref
        # with digest: rebuilding the same content (a lost cache, a re-created registry)
        # pushes a new digest under the same tag, and registering digests would then ask Azure
        # to change an existing version. Same tag, same content; the `images` output carries
        # the digest of the latest push. A prebuilt ref is registered as given, versioned by
        # its own hash.
        for framework in FRAMEWORKS:
            if framework in args.prebuilt:
                registered = pulumi.Output.from_input(args.prebuilt[framework])
                version = hashlib.sha256(args.prebuilt[framework].encode()).hexdigest()[:16]
                self.images[framework], pushed = registered, []
            else:
                version = content_hash(framework)
                registered = pulumi.Output.concat(
                    args.registry_login_server, "/azdl/", framework, ":", version
                )
                image = self._build(framework, version, registered, registries, args.push_after)
                self.images[framework], pushed = image.ref, [image]
            self.environments[framework] = self._environment(
                framework, version, registered, args, pushed
            )

        self.register_outputs({"images": self.images, "environments": self.environments})

    def _build(
        self,
        framework: str,
        version: str,
        tag: pulumi.Output[str],
        registries: list[docker_build.RegistryArgs],
        push_after: Sequence[pulumi.Resource],
    ) -> docker_build.Image:
        """Build images/<framework> with training/ as the named context `training` and push it
        as `tag` (<registry>/azdl/<framework>:<content hash>)."""
        cache = tag.apply(lambda t: t.rpartition(":")[0] + ":buildcache")
        image = docker_build.Image(
            framework,
            docker_build.ImageArgs(
                context=docker_build.BuildContextArgs(
                    location=_relative(IMAGES_DIR / framework),
                    named={"training": docker_build.ContextArgs(location=_relative(TRAINING_DIR))},
                ),
                dockerfile=docker_build.DockerfileArgs(
                    location=_relative(IMAGES_DIR / framework / "Dockerfile")
                ),
                platforms=[docker_build.Platform.LINUX_AMD64],
                tags=[tag],
                push=True,
                build_on_preview=False,  # previews stay quick; `pulumi up` builds
                registries=registries,
                cache_from=[
                    docker_build.CacheFromArgs(
                        registry=docker_build.CacheFromRegistryArgs(ref=cache)
                    )
                ],
                cache_to=[
                    docker_build.CacheToArgs(
                        registry=docker_build.CacheToRegistryArgs(
                            ref=cache, mode=docker_build.CacheMode.MAX
                        )
                    )
                ],
                labels={"org.opencontainers.image.version": version},
            ),
            pulumi.ResourceOptions(parent=self, depends_on=list(push_after)),
        )
        return image

    def _registry_credentials(self, args: TrainingImagesArgs) -> docker_build.RegistryArgs:
        """Push credentials from the deployer's Azure AD token (no admin user, no stored secret)."""
        aad_token = authorization.get_client_token_output().token
        password = pulumi.Output.all(args.registry_login_server, args.tenant_id, aad_token).apply(
            lambda a: push_password(*a)
        )
        return docker_build.RegistryArgs(
            address=args.registry_login_server,
            username=ACR_TOKEN_USER,
            password=pulumi.Output.secret(password),
        )

    def _environment(
        self,
        framework: str,
        version: str,
        ref: pulumi.Output[str],
        args: TrainingImagesArgs,
        pushed: list[pulumi.Resource],
    ) -> pulumi.Output[str]:
        """Register `ref` as version `version` of the Azure ML environment `azdl-<framework>`,
        once the image is `pushed` (a built image; nothing for a prebuilt one)."""
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
            pulumi.ResourceOptions(parent=self, depends_on=[container, *pushed]),
        )
        return env.id

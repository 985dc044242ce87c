"""Images: the GPU training images, built and pushed by `pulumi up`, registered in Azure ML.

Each framework's image (`images/<framework>/Dockerfile`) is built with pulumi-docker-build from
two contexts: its own folder, and the repository's `training/` folder (the code and its pinned
requirements). The tag is a content hash of both, so the same commit content gives the same
tag and no rebuild, and a job always runs the code of the commit that deployed it.

Pushes authenticate with the deployer's own Azure AD identity, not the registry's admin user:
Pulumi's Azure token is exchanged for an ACR refresh token (what `az acr login` does). The
deployer needs push rights on the registry, which the Owner or Contributor role that deploying
the stack takes already grants (AcrPush otherwise). A stack can instead name prebuilt images
(`azdl:images.prebuilt`); those are registered as they are and nothing is built.

Every image becomes an Azure ML environment version (name `azdl-<framework>`, version = tag);
the component's `images` (framework -> pinned image ref) and `environments` (framework ->
environment version id) are the stack outputs of the same names.
"""

import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_docker_build as docker_build
from pulumi_azure_native import authorization, machinelearningservices

from infra.config import IMAGE_FRAMEWORKS as FRAMEWORKS
from infra.config import StackConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = REPO_ROOT / "images"
TRAINING_DIR = REPO_ROOT / "training"
# The user name ACR expects with an ACR refresh token obtained from an Azure AD token.
ACR_TOKEN_USER = "00000000-0000-0000-0000-000000000000"
SKIPPED_PARTS = ("__pycache__", ".pytest_cache")


def content_hash(framework: str) -> str:
    """Hash of everything the image is built from: its folder and training/ (code, requirements).

    File paths and bytes go in, in sorted order; compiled Python caches stay out.
    """
    digest = hashlib.sha256()
    for root in (IMAGES_DIR / framework, TRAINING_DIR):
        files = sorted(
            p
            for p in root.rglob("*")
            if p.is_file() and p.suffix != ".pyc" and not set(p.parts) & set(SKIPPED_PARTS)
        )
        for path in files:
            digest.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def acr_refresh_token(login_server: str, tenant_id: str, aad_token: str) -> str:
    """Exchange an Azure AD access token for an ACR refresh token (ACR's /oauth2/exchange).

    A token that is not a JWT cannot be exchanged: that is an offline rendering under
    `infra.mocks`, where nothing is pushed, so it is passed on unchanged and no request is made.
    """
    if aad_token.count(".") != 2:
        return aad_token
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
            "(Owner, Contributor or AcrPush), and a private registry is reachable only from "
            "inside the VNet"
        ) from None


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


class TrainingImages(pulumi.ComponentResource):
    images: dict[str, pulumi.Output[str]]
    environments: dict[str, pulumi.Output[str]]

    def __init__(
        self, name: str, args: TrainingImagesArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("azdl:infra:TrainingImages", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.images, self.environments = {}, {}

        registries = []
        if any(fw not in args.prebuilt for fw in FRAMEWORKS):
            registries = [self._registry_credentials(args)]

        for framework in FRAMEWORKS:
            if framework in args.prebuilt:
                ref = pulumi.Output.from_input(args.prebuilt[framework])
                version = hashlib.sha256(args.prebuilt[framework].encode()).hexdigest()[:16]
            else:
                version = content_hash(framework)
                ref = self._build(framework, version, registries, args)
            self.images[framework] = ref
            self.environments[framework] = self._environment(framework, version, ref, args, child)

        self.register_outputs({"images": self.images, "environments": self.environments})

    def _build(
        self,
        framework: str,
        tag: str,
        registries: list[docker_build.RegistryArgs],
        args: TrainingImagesArgs,
    ) -> pulumi.Output[str]:
        """Build images/<framework> with training/ as the named context `training`, push it as
        <registry>/azdl/<framework>:<tag>; return the pushed ref (tag and digest)."""
        repository = pulumi.Output.concat(args.registry_login_server, "/azdl/", framework)
        cache = pulumi.Output.concat(repository, ":buildcache")
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
                tags=[pulumi.Output.concat(repository, ":", tag)],
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
                labels={"org.opencontainers.image.version": tag},
            ),
            pulumi.ResourceOptions(parent=self),
        )
        return image.ref  # repository:tag@sha256:…

    def _registry_credentials(self, args: TrainingImagesArgs) -> docker_build.RegistryArgs:
        """Push credentials from the deployer's Azure AD token (no admin user, no stored secret)."""
        aad_token = authorization.get_client_token_output().token
        password = pulumi.Output.all(args.registry_login_server, args.tenant_id, aad_token).apply(
            lambda a: acr_refresh_token(*a)
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
        child: pulumi.ResourceOptions,
    ) -> pulumi.Output[str]:
        """Register `ref` as version `version` of the Azure ML environment `azdl-<framework>`."""
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
            child,
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
            pulumi.ResourceOptions(parent=self, depends_on=[container]),
        )
        return env.id

"""`azdl:cluster`, `azdl:registry` and `azdl:images`: the GPU cluster and the images it runs."""

import re
from typing import Annotated, Any

from pydantic import AfterValidator, WithJsonSchema, model_validator

from infra.config.fields import (
    Bool,
    Int,
    Invalid,
    Section,
    VmSizeName,
    azure_name,
    one_of,
    rule,
    setting,
)
from infra.naming import IMAGE_BUILD_COMPUTE

REGISTRY_SKUS = ("Basic", "Standard", "Premium")
IMAGE_FRAMEWORKS = ("tensorflow", "pytorch")  # images/<framework>/Dockerfile
PRIORITIES = {"dedicated": "Dedicated", "lowPriority": "LowPriority"}


class RegistrySettings(Section):
    """The container registry the training images go to (infra/registry.py)."""

    sku: one_of(REGISTRY_SKUS) = setting(
        "Premium is required with network.mode privateEndpoints (only Premium registries take "
        "private endpoints).",
        "Standard",
    )


NOT_IMAGE_BUILD = rule(lambda name: name != IMAGE_BUILD_COMPUTE, f"any other compute name: "
                       f"{IMAGE_BUILD_COMPUTE!r} is the image-build compute that private (prod) "
                       "stacks create in the same workspace")  # fmt: skip


class ClusterSettings(Section):
    """The AmlCompute GPU cluster jobs run on (infra/cluster.py)."""

    name: Annotated[azure_name("compute"), NOT_IMAGE_BUILD] = setting(
        "AmlCompute name.",
        "gpu-cluster",
        allowed=f"2-16 letters, digits and hyphens, starting with a letter; not "
        f"{IMAGE_BUILD_COMPUTE!r}",
    )
    vm_size: VmSizeName = setting(
        "A GPU size from infra/vm_sizes.yaml.", example="Standard_NC24ads_A100_v4"
    )
    priority: one_of(PRIORITIES) = setting(
        "`lowPriority` is cheaper but can be pre-empted.", "dedicated"
    )
    min_nodes: Annotated[Int, rule(lambda n: n >= 0, "0 to cluster.maxNodes")] = setting(
        "Nodes kept running when idle; 0 scales to zero.", 0, allowed="0 to cluster.maxNodes"
    )
    max_nodes: Annotated[Int, rule(lambda n: n >= 1, "at least 1")] = setting(
        "Upper bound on the nodes a job may use.", allowed="1 or more", example=2
    )
    idle_seconds_before_scale_down: Annotated[
        Int, rule(lambda s: 60 <= s <= 86400, "60 to 86400 seconds")
    ] = setting("Idle time before a node is released.", 300, allowed="60 to 86400")
    node_public_ip: Bool = setting(
        "true gives each node a public IP for outbound traffic; false (outbound through a NAT "
        "gateway) needs network.mode privateEndpoints, since Azure creates computes without "
        "node public IPs only in a workspace with a private endpoint. Prod requires false.",
        default_words="true with serviceEndpoints, false with privateEndpoints",
        allowed="true or false (false only with privateEndpoints)",
        source="https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet",
    )

    @model_validator(mode="after")
    def _rules(self) -> "ClusterSettings":
        if self.min_nodes > self.max_nodes:
            raise Invalid(self.min_nodes, f"0 to cluster.maxNodes ({self.max_nodes})", "minNodes")
        return self


def _image_refs(prebuilt: dict[str, str]) -> dict[str, str]:
    """Framework -> an image ref pinned by tag (not latest) or digest."""
    pattern = r"[a-z0-9.-]+(:\d+)?/[a-z0-9._/-]+(:[\w.-]+)?(@sha256:[0-9a-f]{64})?"
    for framework, ref in prebuilt.items():
        if framework not in IMAGE_FRAMEWORKS:
            raise Invalid(framework, f"allowed: {', '.join(IMAGE_FRAMEWORKS)}", framework)
        match = re.fullmatch(pattern, ref) if isinstance(ref, str) else None
        if not match or not (match.group(2) or match.group(3)):
            raise Invalid(ref, "an image ref with registry, tag or digest, e.g. "
                          "myregistry.azurecr.io/azdl/tensorflow:1.0 or …@sha256:<64 hex>",
                          framework)  # fmt: skip
        if match.group(2) == ":latest" and not match.group(3):
            raise Invalid(ref, "a pinned tag or digest, not :latest", framework)
    return prebuilt


class ImagesSettings(Section):
    """Images built elsewhere instead of by the stack (infra/images.py)."""

    prebuilt: Annotated[
        dict[str, Any],
        AfterValidator(_image_refs),
        WithJsonSchema(
            {
                "type": "object",
                "propertyNames": {"enum": list(IMAGE_FRAMEWORKS)},
                "additionalProperties": {"type": "string"},
            }
        ),
    ] = setting(
        "Framework -> image ref; those frameworks are not built. The cluster identity must be "
        "able to pull them.",
        {},
        allowed=f"keys {', '.join(IMAGE_FRAMEWORKS)}; refs pinned by tag (not latest) or digest",
        example={"tensorflow": "myregistry.azurecr.io/azdl/tensorflow:1.0"},
    )

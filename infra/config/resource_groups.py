"""`azdl:resourceGroups`: existing resource groups a stack deploys into instead of its own."""

from pydantic import model_validator

from infra.config.fields import Invalid, Section, azure_name, setting


class ResourceGroupsSettings(Section):
    """Existing resource groups to deploy into instead of the two the stack creates: the
    deploying identity then needs its roles on these two groups only, none on the subscription
    (docs/deploy.md, The deploying identity)."""

    platform: azure_name("resource group") = setting(
        "The existing group for everything but the data: network, workspace, registry, "
        "compute, identities.",
        allowed="an existing resource group's name (1-90 letters, digits, _ - . ( ), not "
        "ending in .)",
        example="team-ml-rg",
    )  # fmt: skip
    data: azure_name("resource group") = setting(
        "The existing group for the data and outputs accounts (and the NFS share's account); "
        "another group than `platform`.",
        allowed="an existing resource group's name, other than platform",
        example="team-ml-data-rg",
    )  # fmt: skip

    @model_validator(mode="after")
    def _two_groups(self) -> "ResourceGroupsSettings":
        if self.data.lower() == self.platform.lower():
            # Deleting a group deletes everything in it (pulumi/pulumi-azure-native#2522): the
            # data lives apart from what `pulumi destroy` removes.
            raise Invalid(self.data, "another group than platform: the data and outputs live "
                          "apart from what `pulumi destroy` removes", "data")  # fmt: skip
        return self

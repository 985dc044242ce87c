"""Azure ML's documented outbound list for compute in a customer VNet, transcribed from the pages
(MicrosoftDocs/azure-ai-docs, the source of learn.microsoft.com/azure/machine-learning), as
(service tag, protocol, port) triples. "{region}" stands for the workspace's region.

- PUBLIC_INTERNET_REQUIRED / _SITUATIONAL: the "Required" and "Situational" tabs of
  `articles/machine-learning/includes/machine-learning-public-internet-access.md` (ms.date
  2025-02-10), the table that how-to-secure-workspace-vnet ("Required public internet access")
  and how-to-secure-training-vnet include.
- FIREWALL_BASIC: the "Basic configuration" outbound table of
  `articles/machine-learning/how-to-access-azureml-behind-firewall.md` (ms.date 2026-03-19).
- PACKAGE_HOSTS: the host names both pages list for installing Python packages
  (`includes/recommended-network-outbound.md`, ms.date 2023-06-12, and the public internet
  access include above); an NSG cannot allow host names, only service tags and addresses.
"""


def triples(tag: str, protocol: str, *ports: str) -> set[tuple[str, str, str]]:
    return {(tag, protocol, port) for port in ports}


PUBLIC_INTERNET_REQUIRED = (
    triples("AzureActiveDirectory", "Tcp", "80", "443")
    | triples("AzureMachineLearning", "Tcp", "443", "18881")
    | triples("AzureMachineLearning", "Udp", "5831")
    | triples("BatchNodeManagement.{region}", "*", "443")  # "ANY: 443"
    | triples("AzureResourceManager", "Tcp", "443")
    | triples("Storage.{region}", "Tcp", "443")
    | triples("AzureFrontDoor.FrontEnd", "Tcp", "443")
    | triples("MicrosoftContainerRegistry.{region}", "Tcp", "443")
    # "Note that this tag has a dependency on the AzureFrontDoor.FirstParty tag"
    | triples("AzureFrontDoor.FirstParty", "Tcp", "443")
)

# Situational rows: the row, and whether an azdl stack is in that situation.
PUBLIC_INTERNET_SITUATIONAL = {
    # "Port 8787 is required if you use RStudio": no compute instance here, but the firewall
    # page's basic configuration lists 8787 with 443 and 18881, so it is kept.
    ("AzureMachineLearning", "Tcp", "8787"): True,
    # "only required if you have a firewall between your virtual network for Azure ML and a
    # private endpoint for your storage accounts": kept, a landing zone may route through one.
    ("Storage.{region}", "Tcp", "445"): True,
    # "Only needed if you haven't secured Azure Monitor": azdl has no Azure Monitor private link.
    ("AzureMonitor", "Tcp", "443"): True,
    # "Only needed if you enabled the hbi_workspace flag": azdl does not.
    ("Keyvault.{region}", "Tcp", "443"): False,
    # Inbound 44224 "Required if instance/cluster configured with a Public IP option": inbound,
    # handled by the inbound rules, not part of this list.
}

# The firewall page writes some tags differently from the service tag list; each maps to the
# tag an NSG takes. "Frontdoor.FirstParty" is AzureFrontDoor.FirstParty; "MicrosoftContainer
# Registry" (global) covers the regional tag the required list names.
FIREWALL_BASIC = (
    triples("AzureActiveDirectory", "Tcp", "80", "443")
    | triples("AzureMachineLearning", "Tcp", "443", "8787", "18881")
    | triples("AzureMachineLearning", "Udp", "5831")
    | triples("BatchNodeManagement.{region}", "Tcp", "443")
    | triples("AzureResourceManager", "Tcp", "443")
    | triples("Storage.{region}", "Tcp", "443")
    | triples("AzureFrontDoor.FrontEnd", "Tcp", "443")
    | triples("MicrosoftContainerRegistry", "Tcp", "443")
    | triples("Frontdoor.FirstParty", "Tcp", "443")
    | triples("AzureMonitor", "Tcp", "443")
    | triples("VirtualNetwork", "Tcp", "443")
)
FIREWALL_TAG_SPELLING = {
    "Frontdoor.FirstParty": "AzureFrontDoor.FirstParty",
    "MicrosoftContainerRegistry": "MicrosoftContainerRegistry.{region}",
}

PACKAGE_HOSTS = ("anaconda.com", "*.anaconda.com", "*.anaconda.org", "pypi.org",
                 "*.pythonhosted.org", "*.pytorch.org", "*.tensorflow.org")  # fmt: skip

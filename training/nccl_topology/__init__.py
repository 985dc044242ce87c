"""Azure's NCCL topology files for the ND sizes: which size needs which, and where the images
keep them (the images fetch Azure's own files at pinned commits, checked by sha256: `SOURCES`).
Why ND VMs need them and where the size patterns come from: docs/architecture.md ("NCCL topology
files"). MIT licence: LICENSE-azhpc-images.
"""

import fnmatch

# Where the images keep the files (images/*/Dockerfile).
IMAGE_FOLDER = "/opt/azdl/nccl-topology"
# file → (Azure/azhpc-images commit, sha256 of the file there); the Dockerfiles fetch exactly these.
SOURCES = {
    "ndv4-topo.xml": (
        "4a4565a0c0aa9d6944c53420155936061b9c3a98",
        "c3583efb0b6e53f52410e32643b46bb6af99f5f34dcebc1868c47c233f84d2cf",
    ),
    "ndv5-topo.xml": (
        "d21d11e3e5001bd25f7cec26bee987dcd51b2066",
        "c26ff47f1decf03d44ee6e90c4a8afd3bddeec334c5545008f33af2a297e2834",
    ),
}
URL = "https://raw.githubusercontent.com/Azure/azhpc-images/{commit}/topology/{name}"
# Azure/azhpc-images setup_sku_customizations.sh: lower-case VM size pattern → file.
FILES = {
    "standard_nd*v4": "ndv4-topo.xml",
    "standard_nd96is*_h[1-2]00_v5": "ndv5-topo.xml",
}
# Azure/azhpc-images customizations/ndv4.sh and ndv5.sh: /etc/nccl.conf besides the file.
WITH_FILE = {"NCCL_IGNORE_CPU_AFFINITY": "1"}


def topology_file(vm_size: str) -> str | None:
    """The file's name for `vm_size` (e.g. Standard_ND96isr_H100_v5), or None: none needed."""
    for pattern, name in FILES.items():
        if fnmatch.fnmatchcase(vm_size.lower(), pattern):
            return name
    return None


def nccl_environment(vm_size: str) -> dict[str, str]:
    """NCCL_TOPO_FILE (the file's path in the image) and its companion settings, or {}."""
    name = topology_file(vm_size)
    if name is None:
        return {}
    return {"NCCL_TOPO_FILE": f"{IMAGE_FOLDER}/{name}", **WITH_FILE}

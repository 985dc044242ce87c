"""Each InfiniBand HCA of a node tested as Azure's node health checks test it on the ND sizes: a
GPUDirect RDMA loopback with perftest's `ib_write_bw` (the HCA writes from and to the memory of
one GPU, server and client on the same node), its average bandwidth against the size's level.

Source: Azure/azurehpc-health-checks customTests/azure_ib_write_bw_gdr.nhc (commit 0e0a1ac,
2026-05-01): `ib_write_bw -p PORT -s 8388608 -x 0 -F --report_gbits --perform_warm_up
--use_cuda=N -d DEV` as the server, the same plus the node's own host name as the client, HCA n
with GPU n; the `BW average` column of the line that starts with the message size, in Gb/s,
against `check_ib_bw_gdr LEVEL` of conf/<size>.conf (380 on ND96isr_H100_v5: the test that
replaced the single-node NCCL loopback test in commit c674250, 2023-10-13). The HCAs are those
whose port 1 has the InfiniBand link layer (azure_common.nhc `determine_IB_devices`). The output
format is perftest's (linux-rdma/perftest src/perftest_parameters.h: RESULT_FMT_G, REPORT_FMT).
"""

import re
from pathlib import Path

MESSAGE_BYTES = 8388608
BASE_PORT = 18510  # azure_ib_write_bw_gdr.nhc's first port; one port per HCA
SYS_INFINIBAND = Path("/sys/class/infiniband")
_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[(\w+)/sec\]\s+BW average\[(\w+)/sec\]")


def devices(root: Path | None = None) -> list[str]:
    """The node's InfiniBand HCAs (port 1's link layer is InfiniBand), in name order; the
    accelerated-networking NIC (Ethernet) is left out."""
    found = []
    for device in sorted((root or SYS_INFINIBAND).glob("*")):
        layer = device / "ports" / "1" / "link_layer"
        if layer.is_file() and layer.read_text().strip() == "InfiniBand":
            found.append(device.name)
    return found


def command(bin_dir: str, device: str, gpu: int, port: int, server_host: str | None = None):
    """The server's command (no host), or the client's (the server's host name)."""
    cmd = [f"{bin_dir}/ib_write_bw", "-p", str(port), "-s", str(MESSAGE_BYTES), "-x", "0", "-F",
           "--report_gbits", "--perform_warm_up", f"--use_cuda={gpu}", "-d", device]  # fmt: skip
    return [*cmd, server_host] if server_host else cmd


def parse(text: str) -> float:
    """The average bandwidth in Gb/s; ValueError when the output has no result line."""
    unit = None
    for line in text.splitlines():
        if match := _HEADER.match(line):
            unit = match.group(2)
            continue
        fields = line.split()
        if unit is not None and len(fields) >= 4 and fields[0] == str(MESSAGE_BYTES):
            if unit != "Gb":
                raise ValueError(f"ib_write_bw reported {unit}/sec, not Gb/sec (--report_gbits)")
            return float(fields[3])
    raise ValueError("no ib_write_bw result line in the output (did the run fail?)")

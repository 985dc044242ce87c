"""Which transport NCCL picked, read from its own initialisation log (stdlib only):
`NcclCheck.feed(line)` takes one log line at a time; `verdict` is None until the first
communicator is complete (or `finish()` is called at the end of the log), then a `Verdict`.
The log lines it reads: docs/architecture.md ("NCCL's transport").
"""

import re
from dataclasses import dataclass, field

_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_CHANNEL = re.compile(r"NCCL INFO Channel .* via NET/(\S+)")
_GDR_OFF = re.compile(r"NCCL INFO NET/IB ?: GPU Direct RDMA Disabled for HCA (\d+) '([^']+)'")
_NO_IB = re.compile(r"NCCL INFO NET/IB ?: No device found")
_COMPLETE = re.compile(r"NCCL INFO .*Init COMPLETE")


@dataclass
class Verdict:
    ok: bool
    network: str | None  # IB, IBext_v8, Socket, ... (None: NCCL never said)
    gdr_channels: int = 0  # inter-node channels with GPUDirect RDMA
    host_channels: int = 0  # inter-node InfiniBand channels through host memory
    message: str = ""


@dataclass
class NcclCheck:
    """`multi_node`: GPUDirect RDMA is required (single-node jobs talk over NVLink/PCIe and
    only need the fabric to be found)."""

    multi_node: bool
    network: str | None = None
    gdr_channels: int = 0
    host_channels: int = 0
    socket_channels: int = 0
    gdr_disabled: list[str] = field(default_factory=list)
    no_ib_device: bool = False
    verdict: Verdict | None = None

    def feed(self, line: str) -> Verdict | None:
        if self.verdict is not None or "NCCL INFO" not in line:
            return self.verdict
        if match := _NETWORK.search(line):
            self.network = self.network or match.group(1)
            if is_socket(match.group(1)):  # nothing later can change it: fail now
                return self._decide()
        elif match := _CHANNEL.search(line):
            transport = match.group(1)
            if is_socket(transport):
                self.socket_channels += 1
                return self._decide()
            if "/GDRDMA" in transport:
                self.gdr_channels += 1
            else:
                self.host_channels += 1
        elif match := _GDR_OFF.search(line):
            self.gdr_disabled.append(match.group(2))
        elif _NO_IB.search(line):
            self.no_ib_device = True
        elif _COMPLETE.search(line):
            return self._decide()
        return None

    def finish(self) -> Verdict:
        """The verdict on everything fed so far (the log ended before `Init COMPLETE`)."""
        return self.verdict or self._decide()

    def _decide(self) -> Verdict:
        network = self.network or ("IB" if self.gdr_channels or self.host_channels else None)
        counts = {"gdr_channels": self.gdr_channels, "host_channels": self.host_channels}
        if network is None and not (self.gdr_channels or self.host_channels):
            why = "NCCL's log never said which network it uses (was NCCL_DEBUG=INFO set?)"
            self.verdict = Verdict(False, None, **counts, message=why)
        elif is_socket(network or "") or self.socket_channels:
            why = "NCCL fell back to TCP sockets (NET/Socket) instead of InfiniBand"
            if self.no_ib_device:
                why += ": it found no InfiniBand device (NET/IB : No device found)"
            self.verdict = Verdict(False, network or "Socket", **counts, message=why)
        elif not self.multi_node:
            why = f"NCCL uses {network} (single node: GPUDirect RDMA not needed)"
            self.verdict = Verdict(True, network, **counts, message=why)
        elif self.host_channels or (self.gdr_disabled and not self.gdr_channels):
            hcas = ", ".join(sorted(set(self.gdr_disabled))) or "its HCAs"
            why = (
                f"NCCL uses InfiniBand without GPUDirect RDMA ({self.host_channels} inter-node "
                f"channels through host memory; GPU Direct RDMA disabled for {hcas}): is the "
                "nvidia-peermem module loaded on the node?"
            )
            self.verdict = Verdict(False, network, **counts, message=why)
        elif self.gdr_channels:
            why = f"NCCL uses {network} with GPUDirect RDMA on {self.gdr_channels} channels"
            self.verdict = Verdict(True, network, **counts, message=why)
        else:  # in a ring, some ranks reach the other nodes only through their neighbours
            why = f"NCCL uses {network}; this rank connects no channel to another node itself"
            self.verdict = Verdict(True, network, **counts, message=why)
        return self.verdict


def is_socket(transport: str) -> bool:
    return transport.split("/")[0].lower() == "socket"

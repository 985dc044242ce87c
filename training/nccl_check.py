"""Which transport NCCL picked, read from its own log (stdlib only): `NcclCheck.feed(line)` takes
one log line at a time and returns a `Verdict` once it can decide; `at_deadline()` decides when
the wait for a channel across nodes runs out, `finish()` when the log ends. The lines it reads
and where NCCL writes them: docs/architecture.md ("NCCL's transport").
"""

import re
from dataclasses import dataclass, field

# NCCL >= 2.22 names the plugin in its own INFO lines: `IB` (NCCL's own), `IBext_v8` and later
# (HPC-X's nccl-rdma-sharp-plugins), `Socket`.
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_GDR = re.compile(
    r"NCCL INFO NET/(\S+) ?: GPU Direct RDMA (Enabled|Disabled) for HCA (\d+) '([^']+)'"
)
_DEVICES = re.compile(r"NCCL INFO NET/IB ?: Using(.*?)(?:\s\[RO\])?\s*; OOB ")
_DEVICE = re.compile(r"\[\d+\]\s*([^\s:=\[\]{},]+):\d+/(IB|RoCE)")
_NO_IB = re.compile(r"NCCL INFO NET/IB ?: No device found")
_CHANNEL = re.compile(r"NCCL INFO Channel \S+ : .* via NET/(\S+)")
_COMPLETE = re.compile(r"NCCL INFO .*Init COMPLETE")


@dataclass
class Verdict:
    ok: bool
    network: str | None  # IB, IBext_v8, Socket, ... (None: NCCL never said)
    gdr_channels: int = 0  # channels to another node with GPUDirect RDMA
    host_channels: int = 0  # InfiniBand channels to another node through host memory
    message: str = ""


@dataclass
class NcclCheck:
    """`multi_node`: GPUDirect RDMA is required (single-node jobs talk over NVLink/PCIe and only
    need the fabric to be found). `expected_hcas`: InfiniBand HCAs the VM size has (None: not
    checked)."""

    multi_node: bool
    expected_hcas: int | None = None
    network: str | None = None
    devices: dict[str, str] | None = None  # HCA name → link layer, from `NET/IB : Using`
    gdr: dict[str, bool] = field(default_factory=dict)  # HCA name → GPU Direct RDMA at init
    gdr_plugin: str | None = None
    gdr_channels: int = 0
    host_channels: int = 0
    no_ib_device: bool = False
    complete: bool = False  # a communicator printed Init COMPLETE
    verdict: Verdict | None = None

    @property
    def waiting_for_channel(self) -> bool:
        """Init is complete and the check waits for this rank's first channel across nodes
        (NCCL >= 2.22 connects peers at the first collective: NCCL_RUNTIME_CONNECT=1)."""
        return self.verdict is None and self.complete

    def feed(self, line: str) -> Verdict | None:
        if self.verdict is not None or "NCCL INFO" not in line:
            return self.verdict
        if match := _NETWORK.search(line):
            self.network = self.network or match.group(1)
            if is_socket(match.group(1)):  # nothing later can change it: fail now
                return self._decide()
        elif match := _GDR.search(line):
            self.gdr_plugin = match.group(1)
            self.gdr[match.group(4)] = match.group(2) == "Enabled"
        elif match := _DEVICES.search(line):
            if self.devices is None:
                self.devices = dict(_DEVICE.findall(match.group(1)))
        elif _NO_IB.search(line):
            self.no_ib_device = True
        elif match := _CHANNEL.search(line):
            transport = match.group(1)
            if is_socket(transport):
                self.network = self.network or "Socket"
                return self._decide()
            if "/GDRDMA" in transport:
                self.gdr_channels += 1
            else:
                self.host_channels += 1
            if self.host_channels or self.complete:  # a channel through host memory is final
                return self._decide()
        elif _COMPLETE.search(line):
            self.complete = True
            if self.gdr_channels or self._init_problem() or not self.multi_node:
                return self._decide()
        return None

    def at_deadline(self, seconds: float) -> Verdict:
        """The verdict when no channel of this rank crossed nodes within `seconds` of init."""
        return self.verdict or self._decide(
            f"no channel of this rank crossed nodes within {seconds:g} s of Init COMPLETE"
        )

    def finish(self) -> Verdict:
        """The verdict on everything fed so far (the log ended)."""
        return self.verdict or self._decide("the log ended before a channel crossed nodes")

    def infiniband_hcas(self) -> list[str]:
        """The InfiniBand HCAs NCCL listed (`NET/IB : Using`; RoCE devices such as the
        accelerated-networking NIC left out), else those it printed a GPU Direct RDMA line for."""
        if self.devices is not None:
            return [name for name, link in self.devices.items() if link == "IB"]
        return list(self.gdr)

    def _init_problem(self) -> str | None:
        """What the init-time lines alone already rule out for a multi-node job."""
        hcas = self.infiniband_hcas()
        listed = self.devices is not None or self.gdr
        if self.expected_hcas is not None and listed and len(hcas) != self.expected_hcas:
            return (
                f"NCCL found {len(hcas)} InfiniBand HCAs ({', '.join(hcas) or 'none'}); "
                f"the VM size has {self.expected_hcas}: is one down (ibstat on the node)?"
            )
        if not self.multi_node:
            return None
        checked = [name for name in hcas if name in self.gdr] or list(self.gdr)
        disabled = [name for name in checked if not self.gdr[name]]
        if checked and disabled:
            return (
                f"NCCL uses {self.network or 'InfiniBand'} without GPUDirect RDMA: "
                f"NET/{self.gdr_plugin} : GPU Direct RDMA Disabled for {', '.join(disabled)} "
                "(is the nvidia-peermem module loaded on the node?)"
            )
        return None

    def _decide(self, no_channel: str = "") -> Verdict:
        network = self.network or ("IB" if self.gdr_channels or self.host_channels else None)
        counts = {"gdr_channels": self.gdr_channels, "host_channels": self.host_channels}

        def verdict(ok: bool, why: str, net: str | None = network) -> Verdict:
            self.verdict = Verdict(ok, net, **counts, message=why)
            return self.verdict

        if network is None:
            return verdict(False, "NCCL's log never said which network it uses "
                                  "(was NCCL_DEBUG=INFO set?)")  # fmt: skip
        if is_socket(network):
            why = "NCCL fell back to TCP sockets (NET/Socket) instead of InfiniBand"
            if self.no_ib_device:
                why += ": it found no InfiniBand device (NET/IB : No device found)"
            return verdict(False, why, network)
        if problem := self._init_problem():
            return verdict(False, problem)
        if not self.multi_node:
            return verdict(True, f"NCCL uses {network} (single node: GPUDirect RDMA not needed)")
        if self.host_channels:
            return verdict(
                False,
                f"NCCL uses {network} without GPUDirect RDMA: {self.host_channels} channel(s) "
                "to another node go through host memory (no /GDRDMA): is the nvidia-peermem "
                "module loaded on the node?",
            )
        if self.gdr_channels:
            return verdict(True, f"NCCL uses {network} with GPUDirect RDMA "
                                 f"(channels via NET/.../GDRDMA)")  # fmt: skip
        enabled = [name for name, on in self.gdr.items() if on]
        if enabled:  # in a ring, some ranks reach the other nodes only through their neighbours
            return verdict(
                True,
                f"NCCL uses {network}; GPU Direct RDMA Enabled for {len(enabled)} HCAs at init "
                f"({no_channel}, so no channel of its own to confirm it)",
            )
        return verdict(
            False,
            f"NCCL uses {network}, but GPUDirect RDMA could not be verified: no GPU Direct RDMA "
            f"line at init (is NET missing from NCCL_DEBUG_SUBSYS?) and {no_channel}",
        )


def is_socket(transport: str) -> bool:
    return transport.split("/")[0].lower().startswith("socket")

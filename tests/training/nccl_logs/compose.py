"""Composes the `composed_*.log` fixtures: the whole NCCL output of one rank of a 2-node,
16-GPU Horovod job on Standard_ND96isr_H100_v5 (8 InfiniBand HCAs mlx5_ib0..7 and the
accelerated-networking NIC mlx5_an0, Azure/azurehpc-health-checks conf/nd96isr_h200_v5.conf), as
azdl's jobs run it: NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET, runtime connection on (the
default since NCCL 2.22). From process start through the first collectives.

Every line is one of NCCL's (or HPC-X's plugin's) own INFO format strings, in the order the
source emits them, with the subsystems INIT and NET kept and the others (ENV, BOOTSTRAP, GRAPH,
TUNING-only...) left out, as src/debug.cc filters them. The order was taken from real whole logs
of NCCL 2.27.5 (tests/training/nccl_logs/real_*.log) and checked against the source; the values
(addresses, pids, CPU cores, qpns) are illustrative. README.md in this folder says which line
comes from where. Run it to rewrite the fixtures; tests/training/test_infiniband_check.py checks
that the committed files are its output.

    python tests/training/nccl_logs/compose.py
"""

from pathlib import Path

HERE = Path(__file__).parent
HOST = "4f5a2b8c9d0e41f2a3b4c5d6e7f80912000001"  # an Azure ML node's host name (node 0)
PID, TID, SERVICE, UDS = 143, 211, 268, 270  # the process, Horovod's background thread, proxies
RANK, NRANKS, DEV, BUS = 3, 16, 3, "800000"  # rank 3 of 16: GPU 3 of node 0 (PCI domain 0x0008)
IB = [f"mlx5_ib{i}" for i in range(8)]
AN = "mlx5_an0"  # RoCE: the accelerated-networking NIC, which NCCL lists too
OOB = "eth0:10.0.0.5<0>"  # NCCL_SOCKET_IFNAME=eth0 (azdl.jobs.azureml.nccl_environment)


def line(text: str, tid: int = TID) -> str:
    # src/debug.cc: "%s:%d:%d [%d] NCCL INFO " (host, pid, tid, cudaDev) before the message.
    return f"{HOST}:{PID}:{tid} [{DEV}] NCCL INFO {text}"


def own_ib(gdr: bool, hcas: list[str], nccl: str = "2.27.5") -> list[str]:
    """NCCL 2.27.5 with its own IB transport (NVIDIA/nccl v2.27.5-1)."""
    devices = [*hcas, AN]
    out = [
        line("cudaDriverVersion 12090"),  # src/misc/cudawrap.cc INFO(NCCL_INIT)
        line(f"NCCL version {nccl}+cuda12.9"),  # src/init.cc showVersion INFO(NCCL_ALL)
        # src/plugin/plugin_open.cc: "%s/Plugin: Could not find:%s. %s" (INIT|NET)
        line("NET/Plugin: Could not find: libnccl-net.so. "),
    ]
    for index, name in enumerate(devices):  # src/transport/net_ib.cc ncclIbInitDevices (NET)
        link, ar = ("IB", 1) if name.startswith("mlx5_ib") else ("RoCE", 0)
        out.append(line(
            f"NET/IB: [{index}] {name}:uverbs{index}:1/{link} provider=Mlx5 "
            f"speed={400000 if link == 'IB' else 100000} context=0x7f5e3c0{index:02x}9a0 "
            f"pciPath=/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/"
            f"00000{index + 101:03x}-0000-0000-0000-000000000000/pci0{index + 101:03x}:00/"
            f"0{index + 101:03x}:00:00.0 ar={ar}"
        ))  # fmt: skip
        speed = 400000 if link == "IB" else 100000
        out.append(line(f"NET/IB : Made virtual device [{index}] name={name} speed={speed} "
                        "ndevs=1"))  # fmt: skip
    using = "".join(
        f" [{i}]{name}:1/{'IB' if name.startswith('mlx5_ib') else 'RoCE'}"
        for i, name in enumerate(devices)
    )
    out += [
        line(f"NET/IB : Using{using} [RO]; OOB {OOB}"),  # net_ib.cc (INIT|NET)
        line("Initialized NET plugin IB"),  # src/plugin/net.cc (INIT|NET)
        line("Assigned NET plugin IB to comm"),  # src/plugin/net.cc (INIT|NET)
        line("Using network IB"),  # src/init.cc commAlloc (INIT)
    ]
    if gdr:  # src/init.cc dmaBufSupported (INIT): only where the GPU driver offers DMA-BUF
        out.append(line(f"DMA-BUF is available on GPU device {DEV}"))
    out += [
        line(
            f"ncclCommInitRank comm 0x55d1c8a3e0a0 rank {RANK} nranks {NRANKS} cudaDev {DEV} "
            f"nvmlDev {DEV} busId {BUS} commId 0x6b1f0c8e2d4a9f37 - Init START"
        ),
        line("RAS client listening socket at 127.0.0.1<28028>"),  # src/ras (INIT|RAS)
        line(f"MNNVL busId 0x{BUS} fabric UUID 0.0 cliqueId 0x0 state 3 healthMask 0x0"),
    ]
    state = "Enabled" if gdr else "Disabled"
    for index, name in enumerate(devices):  # src/graph/topo.cc ncclTopoProcessNet (NET)
        out.append(line(f"NET/IB : GPU Direct RDMA {state} for HCA {index} '{name}'"))
    # src/graph/paths.cc ncclTopoCheckGdr (GRAPH|NET): this GPU and its own HCA.
    if gdr:
        out.append(line(f"GPU Direct RDMA Enabled for GPU {DEV} / HCA {DEV} (distance 4 <= 5), "
                        "read 1 mode Default"))  # fmt: skip
    out += after_topology("2.27", f"NET/IB/{DEV}", gdr)
    return out


def after_topology(version: str, net: str, gdr: bool) -> list[str]:
    """From the communicator's shape to the first collectives' connections (src/init.cc,
    src/proxy.cc, src/transport/net.cc, src/transport/generic.cc)."""
    trees = " ".join(f"[{c}] 4/-1/-1->3->2" for c in range(16))
    out = [
        line(
            f"comm 0x55d1c8a3e0a0 rank {RANK} nRanks {NRANKS} nNodes 2 localRanks 8 "
            f"localRank {RANK} MNNVL 0"
        ),
        line(f"Trees {trees}"),
        line("P2P Chunksize set to 524288"),
    ]
    if version == "2.27":
        out += [
            line("PROFILER/Plugin: Could not find: libnccl-profiler.so. "),
            line(f"[Proxy Service] Device {DEV} CPU core 27", SERVICE),
            line(f"[Proxy Service UDS] Device {DEV} CPU core 31", UDS),
            line("threadThresholds 8/8/64 | 128/8/64 | 512 | 512"),
            line(
                "16 coll channels, 16 collnet channels, 16 nvls channels, 32 p2p channels, "
                "2 p2p channels per peer"
            ),
            line("CC Off, workFifoBytes 1048576"),
            line("TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin."),
            line(
                f"ncclCommInitRank comm 0x55d1c8a3e0a0 rank {RANK} nranks {NRANKS} cudaDev "
                f"{DEV} nvmlDev {DEV} busId {BUS} commId 0x6b1f0c8e2d4a9f37 - Init COMPLETE"
            ),
            line(
                f"Init timings - ncclCommInitRank: rank {RANK} nranks {NRANKS} total 1.84 "
                "(kernels 0.29, alloc 0.21, bootstrap 0.42, allgathers 0.03, topo 0.61, "
                "graphs 0.04, connections 0.00, rest 0.24)"
            ),
        ]
    else:  # 2.22
        out += [
            line(
                "16 coll channels, 16 collnet channels, 16 nvls channels, 32 p2p channels, "
                "2 p2p channels per peer"
            ),
            line("CC Off, Multi-GPU CC Off, workFifoBytes 1048576"),
            line(
                f"ncclCommInitRank comm 0x55d1c8a3e0a0 rank {RANK} nranks {NRANKS} cudaDev "
                f"{DEV} nvmlDev {DEV} busId {BUS} commId 0x6b1f0c8e2d4a9f37 - Init COMPLETE"
            ),
            line(
                f"Init timings: rank {RANK} nranks {NRANKS} total 1.96 (kernels 0.31, "
                "bootstrap 0.45, allgathers 0.03, topo 0.66, graphs 0.04, connections 0.00, "
                "rest 0.47)"
            ),
        ]
    # The first collective (Horovod broadcasts the initial weights): the rings connect now.
    via = f"{net}/GDRDMA" if gdr else net
    p2p = "P2P/CUMEM/read"  # src/transport/p2p.cc: "via P2P/%s%s%s" (cuMem, NVLink read)
    for channel in range(16):
        out.append(line(f"Channel {channel:02d}/0 : {RANK}[{DEV}] -> 4[4] via {p2p}"))
    for channel in (3, 11):  # the channels whose ring crosses to the other node at this GPU
        out += [
            line(f"Channel {channel:02d}/0 : 11[3] -> {RANK}[{DEV}] [receive] via {via}"),
            line(f"Connected to proxy localRank {DEV} -> connection 0x7f5e200{channel:02d}e80"),
            line(
                f"NET/IB: NCCL Dev {DEV} IbDev {DEV} Port 1 qpn {4711 + channel} mtu 5 LID "
                f"{23 + channel} subnet-prefix 18338657682652659712  FLID 0 "
                f"fifoRkey=0x1f2e{channel:02d} fifoLkey=0x1f2e00",
                SERVICE,
            ),
            line(f"Channel {channel:02d}/0 : {RANK}[{DEV}] -> 10[2] [send] via {via}"),
            line(f"Connected to proxy localRank {DEV} -> connection 0x7f5e201{channel:02d}e80"),
        ]
    out.append(line("Connected all rings, use ring PXN 0 GDR " + ("1" if gdr else "0"))
               if version == "2.27" else line("Connected all rings"))  # fmt: skip
    # The first allreduce of the gradients: the trees connect.
    for channel in (0, 8):
        out.append(line(f"Channel {channel:02d}/0 : {RANK}[{DEV}] -> 4[4] via {p2p}"))
    out.append(line("Connected all trees"))
    return out


def ibext(gdr: bool, hcas: list[str]) -> list[str]:
    """NCCL 2.22.3 (NVIDIA/nccl v2.22.3-1) with HPC-X's nccl-rdma-sharp-plugins, which exports
    the v8 network API as `IBext_v8` (Mellanox/nccl-rdma-sharp-plugins src/ib_plugin.c; its
    p2p_plugin.c before commit 3d2d04b, 2024-05-15, prints "P2P plugin %s")."""
    devices = [*hcas, AN]
    using = "".join(
        f" [{i}]{name}:1/IB/SHARP" if name.startswith("mlx5_ib") else f" [{i}]{name}:1/RoCE"
        for i, name in enumerate(devices)
    )
    out = [
        line("cudaDriverVersion 12060"),
        line("NCCL version 2.22.3+cuda12.6"),
        # p2p_plugin.c (INIT|NET): the plugin's own lines as NCCL loads and initialises it.
        line("Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"),
        line("P2P plugin IBext_v8"),
        line(f"NET/IB : Using{using} [RO]; OOB {OOB}"),
        line("Using network IBext_v8"),  # src/init.cc (INIT)
    ]
    if gdr:
        out.append(line(f"DMA-BUF is available on GPU device {DEV}"))
    out += [
        line(
            f"ncclCommInitRank comm 0x55d1c8a3e0a0 rank {RANK} nranks {NRANKS} cudaDev {DEV} "
            f"nvmlDev {DEV} busId {BUS} commId 0x6b1f0c8e2d4a9f37 - Init START"
        ),
        line(f"MNNVL busId 0x{BUS} fabric UUID 0.0 cliqueId 0x0 state 3 healthMask 0x0"),
    ]
    for index, name in enumerate(devices):
        if gdr:  # p2p_plugin.c nccl_p2p_ib_get_properties (NET), as written (no closing quote)
            out.append(line(f"NET/IB : GPU Direct RDMA (nvidia-peermem) enabled for HCA {index} "
                            f"'{name}"))  # fmt: skip
        # src/graph/topo.cc (NET): NCCL's own line names the plugin: NET/IBext_v8.
        state = "Enabled" if gdr else "Disabled"
        out.append(line(f"NET/IBext_v8 : GPU Direct RDMA {state} for HCA {index} '{name}'"))
    out += after_topology("2.22", f"NET/IBext_v8/{DEV}", gdr)
    return out


def socket(ibext_plugin: bool) -> list[str]:
    """No InfiniBand device in the container (e.g. /dev/infiniband not passed through): the
    network falls back to TCP sockets (src/transport/net_socket.cc)."""
    if ibext_plugin:
        out = [
            line("cudaDriverVersion 12060"),
            line("NCCL version 2.22.3+cuda12.6"),
            line("Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"),
            line("P2P plugin IBext_v8"),
            line("NET/IB : No device found."),  # the plugin's p2p_plugin.c (INIT|NET)
            line("NET/IB : No device found."),  # then NCCL's own net_ib.cc (INIT|NET)
            line(f"NET/IB : Using [RO]; OOB {OOB}"),
            line(f"NET/Socket : Using [0]{OOB}"),
            line("Using network Socket"),
        ]
    else:
        out = [
            line("cudaDriverVersion 12090"),
            line("NCCL version 2.27.5+cuda12.9"),
            line("NET/Plugin: Could not find: libnccl-net.so. "),
            line("NET/IB : No device found."),
            line(f"NET/IB : Using [RO]; OOB {OOB}"),
            line(f"NET/Socket : Using [0]{OOB}"),
            line("Initialized NET plugin Socket"),
            line("Assigned NET plugin Socket to comm"),
            line("Using network Socket"),
        ]
    out.append(
        line(
            f"ncclCommInitRank comm 0x55d1c8a3e0a0 rank {RANK} nranks {NRANKS} cudaDev "
            f"{DEV} nvmlDev {DEV} busId {BUS} commId 0x6b1f0c8e2d4a9f37 - Init START"
        )
    )
    version = "2.22" if ibext_plugin else "2.27"
    return out + after_topology(version, "NET/Socket/0", gdr=False)


MISSING = [name for name in IB if name != "mlx5_ib5"]  # one HCA down
FIXTURES = {
    "composed_ib_gdr.log": ("own IB, GPUDirect RDMA", own_ib(True, IB)),
    "composed_ib_no_gdr.log": (
        "own IB, no GPUDirect RDMA (nvidia-peermem not loaded, no DMA-BUF)",
        own_ib(False, IB),
    ),
    "composed_ib_missing_hca.log": ("own IB, mlx5_ib5 missing", own_ib(True, MISSING)),
    "composed_ib_socket.log": ("NCCL's own transports, no IB device: TCP sockets", socket(False)),
    "composed_ibext_v8_gdr.log": ("HPC-X plugin IBext_v8, GPUDirect RDMA", ibext(True, IB)),
    "composed_ibext_v8_no_gdr.log": ("HPC-X plugin IBext_v8, no GPUDirect RDMA", ibext(False, IB)),
    "composed_ibext_v8_missing_hca.log": (
        "HPC-X plugin IBext_v8, mlx5_ib5 missing",
        ibext(True, MISSING),
    ),
    "composed_ibext_v8_socket.log": ("HPC-X plugin, no IB device: TCP sockets", socket(True)),
}


def render(name: str) -> str:
    what, lines = FIXTURES[name]
    header = (
        f"# Composed, not captured: {what}. One rank's whole NCCL output (INIT,NET), written by\n"
        "# tests/training/nccl_logs/compose.py from NCCL's own format strings in NCCL's order\n"
        "# (README.md in this folder: the sources). Lines starting with '#' are ours.\n"
    )
    return header + "\n".join(lines) + "\n"


if __name__ == "__main__":
    for fixture in FIXTURES:
        (HERE / fixture).write_text(render(fixture))
        print(f"wrote {HERE / fixture}")

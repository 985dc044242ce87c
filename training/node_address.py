"""This node's address as the job's other nodes reach it, for torchrun's `--local-addr`: the
source address of its route to node 0 (MASTER_ADDR, which Azure ML sets on every node of a
`distribution: pytorch` job). torchrun otherwise gives the workers `socket.getfqdn()` of the
rank-0 node as their MASTER_ADDR (torch 2.13 elastic/rendezvous/api.py `RendezvousStoreInfo
.build`, dynamic_rendezvous.py `_NodeDescGenerator`), a name that custom DNS may not resolve.
Stdlib only; a UDP socket's connect picks the route and sends nothing.

    python -m training.node_address     # prints e.g. 10.0.0.5
"""

import os
import socket
import sys


def address(host: str, port: int) -> str:
    """The local address the kernel would send from to reach host:port."""
    family, kind, proto, _, target = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.connect(target)
        return probe.getsockname()[0]


def main() -> int:
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
    if missing:
        print(f"error: {' and '.join(missing)} not set: this node cannot tell its address to the "
              "others (Azure ML sets both on every node of a distribution: pytorch job)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        print(address(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
    except OSError as exc:  # no route to node 0, or its name does not resolve
        print(f"error: no route from this node to MASTER_ADDR {os.environ['MASTER_ADDR']}: {exc}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

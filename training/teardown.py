"""How a torch.distributed process ends without aborting (stdlib only: the operator side reads
it too). docs/torchrun.md, "Ending cleanly", has the whole story; in short:

torch 2.13's `torch/distributed/nn/functional.py` binds `group=group.WORLD` as the default of its
functions when it is imported. DistributedDataParallel's constructor imports it (through
torch.distributed.fsdp → _shard → sharded_tensor → reshard → torch.distributed.nn), so in a
script that builds DDP after `init_process_group` those defaults hold the default process group
for the interpreter's lifetime: `destroy_process_group()` then destroys nothing, and the group,
with Gloo's threads (and rank 0's store server), lives until the last garbage collection inside
Py_FinalizeEx. There CPython 3.11 ends any thread that asks for the GIL (a collective's Python
callback, a tensor's last reference) with pthread_exit (Python/ceval_gil.h, take_gil); its
forced unwind through a C++ noexcept frame is std::terminate, and libstdc++ prints
TEARDOWN_ABORT before SIGABRT. A race: seen in 1 to 2 of 10 runs under CPU load.

The cure is one import before `init_process_group` (`import torch.distributed.nn`): the
defaults then bind while there is no group, and destroying the group joins its threads while
the interpreter is whole.
"""

from pathlib import Path

# libstdc++'s verbose terminate handler (libsupc++/vterminate.cc) when std::terminate is called
# with no exception in flight: here, a forced unwind through a noexcept frame.
TEARDOWN_ABORT = "terminate called without an active exception"
# What a script that aborts this way changes; its job is not retried, as every attempt would race
# the same way (azdl.jobs.retry).
CURE = 'import torch.distributed.nn before init_process_group (docs/torchrun.md, "Ending cleanly")'

# The native threads of torch.distributed's process groups and stores, by the names they give
# themselves: torch 2.13 ProcessGroupGloo::runLoop "pt_gloo_runloop", LibUVStoreDaemon::run
# "pt_tcpstore_uv" (the classic store "pt_tcpstore"), ProcessGroupNCCL's "pt_nccl_*"; Gloo's TCP
# loop "gloo_tcp_loop".
C10D_THREADS = ("pt_gloo", "gloo_", "pt_tcpstore", "pt_nccl")


def c10d_threads() -> list[str]:
    """The names of this process's torch.distributed threads alive now (Linux: /proc)."""
    names = []
    for comm in Path("/proc/self/task").glob("*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:  # the thread ended while being listed
            continue
        if name.startswith(C10D_THREADS):
            names.append(name)
    return sorted(names)

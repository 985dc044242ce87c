"""A user's torchrun script whose process group outlives it (`--pin`) or not: the teardown
abort of training/teardown.py made certain instead of a race.

    azdl train --launcher torchrun --script tests/training/teardown_script.py [-- --pin]

With --pin, torch.distributed.nn is first imported after init_process_group (as DDP's constructor
imports it), so its functions' defaults hold the default group past destroy_process_group().
Rank 0 leaves a collective in flight, with a Python callback, and returns; rank 1 joins it
DELAY_S later, when rank 0's interpreter is finalizing: the callback's thread asks for the GIL,
Python 3.11 ends it with pthread_exit, and the process aborts with "terminate called without an
active exception". Without --pin the module is imported before the group exists, and
destroy_process_group() waits for the collective and its callback: both ranks exit 0.
"""

import sys
import time

import torch
import torch.distributed as dist

DELAY_S = 4.0

pin = "--pin" in sys.argv[1:]
if not pin:
    import torch.distributed.nn
dist.init_process_group("gloo")
if pin:
    import torch.distributed.nn
rank = dist.get_rank()
if rank == 1:
    time.sleep(DELAY_S)
done = dist.all_reduce(torch.ones(1), async_op=True).get_future().then(lambda f: f.value())
if rank == 1:
    done.wait()
dist.destroy_process_group()
print(f"rank {rank}: script returned", flush=True)

"""A user's torchrun script with a DDP model whose process group ends cleanly or, on purpose, in
one of the two traps of docs/torchrun.md "Ending cleanly", made certain instead of a race:

    azdl train --launcher torchrun --script tests/training/teardown_script.py [-- --pin | --hold]

Rank 0 leaves a collective in flight, with a Python callback; rank 1 joins it DELAY_S later.

--pin: torch.distributed.nn is first imported after init_process_group (as DDP's constructor
imports it), so its functions' defaults hold the default group past destroy_process_group().
Rank 0 returns, and rank 1 joins when rank 0's interpreter is finalizing: the callback's thread
asks for the GIL, Python 3.11 ends it with pthread_exit, and the process aborts with "terminate
called without an active exception".

--hold: rank 0 destroys the group while its DDP model lives, so the model's Reducer holds the
group's last reference; dropping the model then destroys the group with the GIL held, joining the
Gloo thread that runs the collective. When rank 1 joins, that thread's callback asks for the GIL:
rank 0 hangs for good. Rank 1 drops its model first (the cure), so it returns.

Neither: the module is imported before the group exists and the model goes before the group, so
destroy_process_group() waits for the collective and its callback with the GIL released: both
ranks exit 0.
"""

import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

DELAY_S = 4.0

pin, hold = "--pin" in sys.argv[1:], "--hold" in sys.argv[1:]
if not pin:
    import torch.distributed.nn
dist.init_process_group("gloo")
if pin:
    import torch.distributed.nn
model = DistributedDataParallel(torch.nn.Linear(1, 1))
rank = dist.get_rank()
hold = hold and rank == 0
if rank == 1:
    time.sleep(DELAY_S)
done = dist.all_reduce(torch.ones(1), async_op=True).get_future().then(lambda f: f.value())
if rank == 1:
    done.wait()
if not hold:
    del model
dist.destroy_process_group()
if hold:
    del model
print(f"rank {rank}: script returned", flush=True)

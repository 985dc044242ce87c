"""A plain torch.distributed script, as PyTorch's DDP tutorial teaches it: the process group
from torchrun's environment (env://), DistributedDataParallel, a DistributedSampler. Nothing in
it knows azdl; it runs unchanged under any of these (azdl reads the script and starts it under
torchrun):

    azdl train --script examples/torchrun/ddp_minimal.py -- --epochs 3
    azdl submit --stack dev --storage synthetic \\
        --script examples/torchrun/ddp_minimal.py -- --epochs 3
    torchrun --standalone --nproc-per-node 2 examples/torchrun/ddp_minimal.py --epochs 3

A small regression network on generated data; rank 0 prints each epoch's loss (averaged over
the workers) and, with --checkpoint FILE, saves the model there. docs/torchrun.md walks
through it.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.distributed.nn  # before init_process_group: see below
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--checkpoint", help="rank 0 saves the model's state here at the end")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    # torchrun (or Azure ML) sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT.
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    # torch.distributed.nn binds the default group into its functions' defaults when first
    # imported, and DDP's constructor imports it: imported after this line, it would keep the
    # group (and Gloo's threads) alive past destroy_process_group(), and the interpreter's exit
    # could abort ("terminate called without an active exception"). Imported above, it binds
    # nothing. docs/torchrun.md, "Ending cleanly".
    dist.init_process_group(backend)
    train(args, device)
    # The DDP model is gone with train()'s frame: the group's last reference is torch's own, so
    # destroying it joins Gloo's threads with the GIL released. Destroyed while the model lived,
    # the group would die later with the model, holding the GIL, and could hang there.
    dist.destroy_process_group()


def train(args: argparse.Namespace, device: torch.device) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same data on every worker; the sampler gives each its share
    x = torch.randn(1024, 16)
    y = x @ torch.randn(16, 1) + 0.1 * torch.randn(1024, 1)
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=world, rank=rank)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, sampler=sampler)

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    device_ids = [device.index] if device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=device_ids)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        total = torch.zeros(2, device=device)  # loss sum, batches
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(ddp(inputs.to(device)), targets.to(device))
            loss.backward()  # DDP averages the gradients over the workers here
            optimizer.step()
            total += torch.stack([loss.detach(), torch.ones((), device=device)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"rank 0 of {world}: epoch {epoch} loss {float(total[0] / total[1]):.4f}")
    if rank == 0 and args.checkpoint:
        torch.save(model.state_dict(), args.checkpoint)
        print(f"saved {args.checkpoint}")


if __name__ == "__main__":
    main()

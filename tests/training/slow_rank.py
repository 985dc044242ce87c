"""Test-only user script: training.torch.train with one rank made slow on purpose, for
tests/training/test_stragglers.py. `python slow_rank.py RANK SECONDS TRAIN-ARGS...`: rank RANK
burns SECONDS of CPU before each forward pass; the other ranks train as usual."""

import os
import sys
import time

from training.torch import train


def burn(seconds: float) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def main() -> int:
    slow_rank, seconds = int(sys.argv[1]), float(sys.argv[2])
    # Horovod's gloo launcher sets HOROVOD_RANK in each worker, torchrun sets RANK.
    rank = int(os.environ.get("HOROVOD_RANK", os.environ.get("RANK", "-1")))
    build_model = train.build_model

    def build(name, classes):
        model = build_model(name, classes)
        if rank == slow_rank:
            model.register_forward_pre_hook(lambda _module, _inputs: burn(seconds))
        return model

    train.build_model = build
    return train.main(sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())

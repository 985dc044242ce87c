"""Seeds of the training data order, so that a resumed run does not replay the first epoch's.

A run that resumes at (epoch, step) seeds its shuffles with `shuffle_seed(seed, rank, epoch,
step)`: a fresh, deterministic order for every rank and every start position. A relaunch after
epoch 3 thus draws a different order than the run's first epoch did (which a fixed seed would
replay: before this, every resume repeated epoch 0's order), and two ranks never share one.
"""

import hashlib


def shuffle_seed(seed: int, rank: int, epoch: int, step: int = 0) -> int:
    """A 63-bit seed for tf.data / torch shuffles from the run's `--seed`, the worker's rank and
    the position (epochs done, steps done in the epoch) its data stream starts at."""
    digest = hashlib.blake2b(f"{seed}/{rank}/{epoch}/{step}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1

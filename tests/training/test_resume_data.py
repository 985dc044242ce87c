"""The data side of starting (and restarting) a run.

- Shards without a manifest are counted once per job, not once per worker, and not again after
  an elastic reset (issue 12, point 10). Two workers are simulated by two threads, each with
  its own per-process cache and a `gather` that behaves like `hvd.allgather_object` (every
  worker gets the list of every worker's object). The counting itself is the real one: tf.data
  reading the TFRecord files.
- A resumed run's data order is not the first epoch's order again (point 8): the shuffles are
  seeded by (seed, rank, epoch, step) of the position the stream starts at.
"""

import threading
from collections import Counter

import pytest
from worker_runs import TINY, write_tiny_tfrecords

from training.data import record_count
from training.data.shards import list_shards

pytestmark = pytest.mark.training_env

PER_SHARD = 6


class Job:
    """`size` simulated workers: an allgather over threads, and how often each shard is read."""

    def __init__(self, size):
        self.size, self.reads = size, Counter()
        self._barrier = threading.Barrier(size)
        self._objects = [None] * size
        self._lock = threading.Lock()

    def counter(self, path):
        with self._lock:
            self.reads[path] += 1
        return record_count.count_records(path)

    def run(self, data_dir, files, caches):
        totals = [None] * self.size

        def worker(rank):
            def gather(obj):
                self._objects[rank] = obj
                self._barrier.wait()
                everyone = list(self._objects)
                self._barrier.wait()
                return everyone

            totals[rank] = record_count.count_examples(
                data_dir, files, rank, self.size, gather, 2, self.counter, caches[rank]
            )

        threads = [threading.Thread(target=worker, args=(r,)) for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        return totals


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = write_tiny_tfrecords(
        tmp_path_factory.mktemp("slim"), train_shards=4, validation_shards=0, per_shard=PER_SHARD
    )
    return root, list_shards(root, "train")


def test_every_shard_is_read_once_per_job_and_every_worker_gets_the_total(shards):
    root, files = shards
    job = Job(2)
    caches = [{}, {}]
    assert job.run(root, files, caches) == [4 * PER_SHARD, 4 * PER_SHARD]
    assert job.reads == Counter(files)  # each shard once, by the worker that trains on it
    assert caches[0] == caches[1] == {f: PER_SHARD for f in files}

    # An elastic reset: the survivor (rank 0's cache) alone, or with a new worker that knows
    # nothing, reads no shard again.
    again = Job(1)
    assert again.run(root, files, caches[:1]) == [4 * PER_SHARD] and not again.reads
    joined = Job(2)
    assert joined.run(root, files, [caches[0], {}]) == [4 * PER_SHARD] * 2
    assert sum(joined.reads.values()) <= len(files[1::2])  # at most the joiner's own shards


def test_a_manifest_is_read_instead_of_the_shards(shards, tmp_path):
    from training.data.prepare.manifest import Manifest, SplitSummary

    _, files = shards
    summary = SplitSummary(num_examples=1234, num_shards=4, class_counts={})
    Manifest(label_map={}, splits={"train": summary}, shards=[]).write(tmp_path)
    assert record_count.count_examples(str(tmp_path), files, count_file=_never, cache={}) == 1234


def _never(path):
    raise AssertionError(f"{path} was read although there is a manifest")


def _labels(root, start, batches=6):
    """Rank 0 of 2's first training labels from a stream that starts at `start`. One shard per
    rank: the interleave has one file, so the order is the shuffle's alone (deterministic)."""
    from training import options
    from training.tensorflow import pipeline

    args = options.parse_args("tf", ["--data-dir", str(root), "--batch-size", "4", *TINY])
    data = pipeline.make_data(args, 0, 2, 1, start)
    return [int(x) for _, labels in data.train.take(batches) for x in labels]


def test_a_resumed_stream_does_not_replay_the_first_epochs_order(tmp_path):
    root = write_tiny_tfrecords(tmp_path, train_shards=2, validation_shards=0, per_shard=24)
    first = _labels(root, (0, 0))
    assert first == _labels(root, (0, 0))  # a position always gives the same order
    assert sorted(first) != first  # and it is shuffled
    for resumed_at in ((1, 0), (0, 3)):
        assert _labels(root, resumed_at) != first, resumed_at


def test_shuffle_seeds_differ_by_rank_and_position_and_stay_put():
    from training.data.shuffle_order import shuffle_seed

    seeds = {shuffle_seed(0, r, e, s) for r in range(4) for e in range(50) for s in (0, 7)}
    assert len(seeds) == 4 * 50 * 2 and all(0 <= x < 2**63 for x in seeds)
    assert shuffle_seed(5, 1, 2, 3) == shuffle_seed(5, 1, 2, 3) != shuffle_seed(6, 1, 2, 3)

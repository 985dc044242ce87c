"""Horovod data-parallel training, one sub-package per flavour:

- `training.torch`: PyTorch (`python -m training.torch.train`);
- `training.tensorflow`: Keras `model.fit` (`train_keras`) and a custom loop (`train_loop`);
- `training.data`: the framework-free data path (TFRecords, shards, preparation);
- at the top, what all flavours share: `options`, `recipe`, `schedule`, `checkpoints`,
  `throughput`, `common`, `errors`.

The modules `training/train_torch.py`, `train_keras.py` and `train_tf.py` are deprecated aliases
of the entry scripts, kept for one release."""

# The entry script of each flavour (`azdl train --framework NAME`, the jobs' commands, the tests).
ENTRY_MODULES = {
    "keras": "training.tensorflow.train_keras",
    "tf": "training.tensorflow.train_loop",
    "torch": "training.torch.train",
}

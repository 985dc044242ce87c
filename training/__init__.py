"""Data-parallel training, one sub-package per flavour:

- `training.torch`: PyTorch (`python -m training.torch.train`), under Horovod or torchrun;
- `training.tensorflow`: Keras `model.fit` (`train_keras`) and a custom loop (`train_loop`),
  under Horovod;
- `training.data`: the framework-free data path (TFRecords, shards, preparation);
- `training.flavours`: the table of flavours (entry module, image, launchers);
- at the top, what all flavours share: `options`, `recipe`, `schedule`, `checkpoints`,
  `throughput`, `worker`, `errors`."""

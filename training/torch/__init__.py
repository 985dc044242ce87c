"""The PyTorch flavour: `python -m training.torch.train` (entry script), its ResNet50 (`resnet`,
`models`), the recipe's torch side (`recipe`), the TFRecord input pipeline without TensorFlow
(`data`) and Horovod elastic training (`elastic`). Imports no TensorFlow."""

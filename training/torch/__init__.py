"""The PyTorch flavour: `python -m training.torch.train` (entry script), its ResNet50
(`torch_resnet`, `torch_models`), the recipe's loss and weight decay (`torch_loss`), the TFRecord
input pipeline without TensorFlow (`loader`: `record_batches` made in worker processes from
`crops` and `jpeg_decode`, finished on the device by `device_finish`) and Horovod elastic
training (`python -m training.torch.train_elastic`). Imports no TensorFlow."""

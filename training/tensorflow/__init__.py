"""The TensorFlow flavours: Keras `model.fit` (`python -m training.tensorflow.train_keras`) and a
custom training loop (`python -m training.tensorflow.train_loop`), with what both share: the
Keras ResNet50 (`resnet`, `models`), the recipe's TF side (`recipe`), the tf.data pipeline
(`pipeline`), start-up and checkpoints (`common`), elastic state (`elastic`) and fp16 loss
scaling (`loss_scale`)."""

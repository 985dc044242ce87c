"""The TensorFlow flavours: Keras `model.fit` (`python -m training.tensorflow.train_keras`) and a
custom training loop (`python -m training.tensorflow.train_loop`), with what both share: the
Keras ResNet50 (`keras_resnet`, `keras_models`), the recipe's loss and weight decay
(`keras_loss`), the tf.data pipeline (`pipeline`), start-up, validation and checkpoints
(`tf_worker`), where a run stands and elastic runs (`elastic_state`) and fp16 loss scaling
(`loss_scale`)."""

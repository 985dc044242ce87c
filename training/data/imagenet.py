"""The sizes of ImageNet-1k (ILSVRC-2012), the dataset the built-in flavours train on: one home
for the training options' defaults, the synthetic source and the operator's estimates (no
library imported, so `azdl` reads them without NumPy)."""

IMAGENET_TRAIN_IMAGES = 1_281_167
IMAGENET_VALIDATION_IMAGES = 50_000

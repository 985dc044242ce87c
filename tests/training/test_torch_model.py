"""The plain-PyTorch ResNet50 v1.5 and the channels-last path (one process, seconds)."""

import pytest
import torch  # the training environment has both: a broken install must fail, not skip

from training.torch.torch_models import build_model
from training.torch.torch_resnet import Bottleneck, resnet50


def test_resnet50_has_torchvisions_parameter_count_and_v1_5_strides():
    model = resnet50(1000)
    assert sum(p.numel() for p in model.parameters()) == 25_557_032
    blocks = [m for m in model.modules() if isinstance(m, Bottleneck)]
    assert len(blocks) == 3 + 4 + 6 + 3
    downsampling = [b for b in blocks if b.conv2.stride == (2, 2)]
    assert len(downsampling) == 3  # first block of stages 2-4, in the 3×3 convolution (v1.5)
    assert all(b.conv1.stride == (1, 1) for b in blocks)
    assert all(not b.bn3.weight.detach().any() for b in blocks)  # blocks start as identity


@pytest.mark.parametrize(("name", "classes"), [("resnet50", 10), ("tiny", 4)])
def test_models_give_one_logit_per_class_at_small_image_sizes(name, classes):
    torch.manual_seed(0)
    logits = build_model(name, classes)(torch.randn(2, 3, 32, 32))
    assert logits.shape == (2, classes)


def test_channels_last_changes_the_layout_not_the_result_and_keeps_gradients_contiguous():
    torch.manual_seed(0)
    model = resnet50(10).eval()
    images = torch.randn(2, 3, 64, 64)
    nhwc = images.contiguous(memory_format=torch.channels_last)
    assert model.stem(nhwc).is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(model(nhwc), model(images), rtol=1e-4, atol=1e-4)
    model(nhwc).sum().backward()
    # Horovod 0.28.1 allreduces only contiguous tensors (horovod/horovod#3491).
    assert all(p.grad.is_contiguous() for p in model.parameters())


def test_unknown_model_names_the_known_ones():
    with pytest.raises(ValueError, match="allowed: resnet50, tiny"):
        build_model("resnet18", 10)

"""`azdl estimate`'s communication model all-reduces each model's gradients: the parameter counts
it uses are those of the models the jobs train (training/torch/torch_models.py and the Keras
ones), and ResNet50's is torchvision's published 25,557,032 (pytorch/vision,
torchvision/models/resnet.py: ResNet50_Weights.IMAGENET1K_V1 meta `num_params`)."""

import pytest

from azdl.estimate.workload import MODELS

TORCHVISION_RESNET50_PARAMS = 25_557_032


@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradient_size_is_the_trained_models_parameter_count(name):
    from training.torch.torch_models import build_model

    model = build_model(name, 1000)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert MODELS[name].parameters == trainable
    assert MODELS[name].gradient_bytes == 4 * trainable


def test_resnet50_matches_torchvisions_published_count():
    assert MODELS["resnet50"].parameters == TORCHVISION_RESNET50_PARAMS


def test_the_keras_resnet50_has_as_many_trainable_weights():
    from training.tensorflow.keras_models import build_model

    model = build_model("resnet50", 224, 1000)
    assert sum(int(w.shape.num_elements()) for w in model.trainable_weights) == (
        MODELS["resnet50"].parameters
    )

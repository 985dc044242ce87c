"""The pace `azdl estimate` predicts for a job's cluster, as tags on the job: `azdl submit` sets
them on a built-in flavour's job, `azdl jobs watch` sets the measured pace against them."""

from azdl.estimate.throughput import Inputs, read_project_gpu_kit, read_published, throughput
from azdl.estimate.workload import MODELS
from infra.catalogue import VmSize

# The predicted images/s, and where the figure comes from (the estimate's table cell).
IMAGES_TAG, BASIS_TAG = "azdl.estimate_images_per_s", "azdl.estimate_basis"


def estimate_tags(size: VmSize, nodes: int, model: str) -> dict[str, str]:
    """The tags of a job training `model` on `nodes` nodes of `size`: the images/s `azdl
    estimate` shows for them from its default inputs (the published figures, the project's GPU
    kit results where the kit has run), and its basis; none where the estimate has no figure."""
    if model not in MODELS or not size.gpus:  # estimate takes built-in models on GPU sizes
        return {}
    inputs = Inputs(published=read_published())
    read_project_gpu_kit(inputs)  # a file it cannot use is left out, as the estimate does
    rate = throughput(size, nodes, MODELS[model], inputs)
    if rate.images_per_sec is None:
        return {}
    return {IMAGES_TAG: f"{rate.images_per_sec:.1f}", BASIS_TAG: rate.short}

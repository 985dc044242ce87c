"""What a 2-worker run of a built-in flavour leaves in its MLflow store (SQLite, as `azdl train`
sets it): one run, every epoch metric once per epoch, written by rank 0 alone. The training
tests' synthetic fixtures run with a store (tests/training/test_tf_training.py,
test_torch_training.py) and hold their runs to this."""

from conftest import BALANCED_FACTOR

EPOCH_METRICS = {
    "loss", "accuracy", "lr", "val_loss", "val_accuracy", "val_top5", "images_per_sec",
    "epoch_time_s", "step_time_s.rank_0", "step_time_s.rank_1",
}  # fmt: skip
TORCH_EPOCH_METRICS = {
    "compute_time_s.rank_0", "compute_time_s.rank_1", "compute_ratio_max", "stragglers",
}  # fmt: skip
# The torch flavour's run is a balanced one: it names no straggler (BALANCED_FACTOR's why).
TORCH_ARGS = ["--straggler-factor", BALANCED_FACTOR]


def check_run(uri: str, framework: str, epochs: int, output: str) -> None:
    """The run's output and its store, as rank 0 alone writes them."""
    from mlflow.tracking import MlflowClient

    assert output.count("metrics: MLflow run") == 1, output  # rank 0 only
    if framework == "torch":  # the straggler line; a slow rank: tests/training/test_stragglers.py
        assert output.count(f"- no straggler (at {BALANCED_FACTOR}x)") == epochs, output
        assert f"stragglers over the run: none in {epochs} epochs" in output
        assert "straggler: rank" not in output
    else:
        assert output.count(f"stragglers: not timed by the {framework} flavour") == 1

    client = MlflowClient(tracking_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "azdl"]
    (mlrun,) = client.search_runs([experiment.experiment_id])
    assert mlrun.info.status == "FINISHED"
    assert mlrun.data.params["framework"] == framework and mlrun.data.params["workers"] == "2"
    logged = set(mlrun.data.metrics)
    expected = EPOCH_METRICS | (TORCH_EPOCH_METRICS if framework == "torch" else set())
    assert logged >= expected, expected - logged
    if framework == "torch":
        assert mlrun.data.tags["stragglers"] == "none"
    assert any(name.startswith("images_per_sec.node_") for name in logged)
    for name in expected:
        history = client.get_metric_history(mlrun.info.run_id, name)
        assert sorted(m.step for m in history) == list(range(1, epochs + 1)), (name, history)
    (final,) = client.get_metric_history(mlrun.info.run_id, "run_images_per_sec")
    assert final.value > 0

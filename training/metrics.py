"""Metrics to MLflow from rank 0, for the built-in scripts and for users' own Horovod scripts.

    from training import metrics

    run = metrics.start(hvd.rank(), params={"lr": args.lr})
    run.log({"loss": loss, "accuracy": acc}, step=epoch)   # a no-op on every rank but 0
    run.close()

Where they go is MLflow's own setting, MLFLOW_TRACKING_URI (docs/architecture.md, "Metrics").
A tracking server that can't be reached never ends the run: each MLflow call gets a few short
retries, the first failure prints one warning, and training goes on.
"""

import math
import os
import sys

EXPERIMENT = "azdl"
# MLflow's HTTP retry settings (mlflow/environment_variables.py, mlflow 3.15): its defaults are 7
# retries with a backoff factor of 2 and a 120 s timeout per request, so one call against an
# unreachable server blocks for minutes, then raises. A value the user set wins.
SHORT_RETRIES = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}


class Run:
    """Rank 0's MLflow run, started at the first `log` (a run that fails while setting up leaves
    no empty run behind); every method is a no-op on the other ranks."""

    def __init__(self, rank: int, run_name: str | None = None, params: dict | None = None):
        self._pending = rank == 0
        self._run_name, self._params = run_name, params
        self._mlflow = None
        self._warned = False

    @property
    def active(self) -> bool:
        return self._mlflow is not None

    def _begin(self) -> None:
        """Azure ML's job run when MLFLOW_RUN_ID is set, else a new run in
        MLFLOW_EXPERIMENT_NAME or "azdl"; nothing without MLFLOW_TRACKING_URI."""
        self._pending = False
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            print(
                "metrics: MLFLOW_TRACKING_URI is not set; nothing goes to MLflow", file=sys.stderr
            )
            return
        for name, value in SHORT_RETRIES.items():
            os.environ.setdefault(name, value)
        import mlflow
        from mlflow.exceptions import MlflowException

        try:
            if not os.environ.get("MLFLOW_RUN_ID"):
                mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME", EXPERIMENT))
            active = mlflow.start_run(run_name=self._run_name)
        except MlflowException as exc:
            self._pending = True  # no run yet: the next `log` tries again
            self._warn(exc)
            return
        if self._params:
            try:
                mlflow.log_params({k: v for k, v in self._params.items() if v is not None})
            except MlflowException as exc:
                self._warn(exc)
        where = mlflow.get_tracking_uri()
        print(f"metrics: MLflow run {active.info.run_id} at {where}", file=sys.stderr, flush=True)
        self._mlflow = mlflow

    def _warn(self, exc: Exception) -> None:
        """The first MLflow failure of the run, once; training goes on without it."""
        if self._warned:
            return
        self._warned = True
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(
            f"warning: metrics: MLflow at {os.environ.get('MLFLOW_TRACKING_URI')} did not take "
            f"the metrics ({first}); training goes on, and later epochs try again (this warning "
            "is not repeated)",
            file=sys.stderr,
            flush=True,
        )

    def log(self, values: dict[str, float | None], step: int) -> None:
        """One value per metric at `step`; None and NaN values are left out."""
        if self._pending:
            self._begin()
        if self._mlflow is None:
            return
        clean = {k: float(v) for k, v in values.items() if v is not None and not math.isnan(v)}
        if clean:
            from mlflow.exceptions import MlflowException

            try:
                self._mlflow.log_metrics(clean, step=step)
            except MlflowException as exc:
                self._warn(exc)

    def tag(self, key: str, value: str) -> None:
        """One tag on the run (a run's summary, such as its stragglers)."""
        if self._pending:
            self._begin()
        if self._mlflow is not None:
            self._mlflow.set_tag(key, value)

    def close(self) -> None:
        if self._mlflow is not None:
            from mlflow.exceptions import MlflowException

            try:
                self._mlflow.end_run()
            except MlflowException as exc:
                self._warn(exc)
            self._mlflow = None


def start(rank: int, run_name: str | None = None, params: dict | None = None) -> Run:
    """Rank 0: the MLflow run, from its first `log`; other ranks: a Run that does nothing."""
    return Run(rank, run_name, params)

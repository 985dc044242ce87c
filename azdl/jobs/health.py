"""The pre-flight health gate in a job (`training.health.gate` on the job's own nodes, judged
against the size's published baseline, infra/nccl_baselines.yaml) and the job of
`azdl cluster check` that runs it alone."""

import shlex

from azdl.errors import AzdlError
from azdl.jobs.azureml import command_job, nccl_environment, output_folder
from azdl.jobs.stack_outputs import StackOutputs
from azdl.runtime import module_command
from infra.nccl_baselines import Level, baseline
from training.health.gate import BIN_DIR, PERFTEST_DIR, PREFIX

# Where the gate's JSON goes: a job output of its own, beside checkpoints and logs.
OUTPUT = "health"
# The message size where a size has no published baseline (figures reported, not judged).
UNJUDGED_BYTES = 1 << 30


def require_gpus(outputs: StackOutputs) -> None:
    """The gate runs nvidia-smi and nccl-tests: a clear error on a CPU size."""
    if outputs.vm_size.gpus == 0:
        raise AzdlError(
            f"--health-check needs GPUs, but cluster {outputs['clusterName']!r} runs "
            f"{outputs.vm_size.name}, a CPU size (gpus: 0 in infra/vm_sizes.yaml)"
        )


# The gate runs nccl-tests and perftest as azdl's images build them; a team's own environment
# (azdl submit --environment) has not got them.
_TOOLS = f"nccl-tests and perftest as azdl's images build them ({BIN_DIR}, {PERFTEST_DIR})"
NOT_IN_OWN_ENVIRONMENT = (
    f"--health-check runs {_TOOLS}, which an --environment of your own has not got: leave "
    "--health-check out, or leave --environment out to run on azdl's image"
)
NO_GATE_IN_OWN_ENVIRONMENT = f"--environment: no health gate before training (it runs {_TOOLS})"


def wanted(outputs: StackOutputs, nodes: int, flag: bool | None, own_environment: bool) -> bool:
    """--health-check / --no-health-check, else on for multi-node jobs on InfiniBand sizes on
    azdl's image (never on a team's own environment, which has not got the gate's tools)."""
    if flag is None:
        return nodes > 1 and outputs.vm_size.infiniband and not own_environment
    return flag


def _levels(scope: str, level: Level | None) -> list[str]:
    if level is None:
        return []
    values = {"expected": level.expected_gbps, "warn": level.warn_below_gbps,
              "fail": level.fail_below_gbps}  # fmt: skip
    return [f"--{scope}-{name}={value:g}" for name, value in values.items() if value is not None]


def gate_step(outputs: StackOutputs, nodes: int, across_nodes: bool = False) -> str:
    """The shell command every MPI process runs: before training, each node's own checks;
    `across_nodes` (a job of the gate alone) adds the MPI all-reduce across the nodes, which
    can't precede training's own MPI start in the same job (training/health/gate.py)."""
    size = outputs.vm_size
    published = baseline(size.name)
    command = [f"--gpus={size.gpus}", f"--nodes={nodes}"]
    command.append(f"--bytes={published.message_bytes if published else UNJUDGED_BYTES}")
    command.append(f"--out=${{{{outputs.{OUTPUT}}}}}")
    if across_nodes:
        command.append("--across-nodes")
    if published is not None:
        command += _levels("single", published.single_node)
        command += _levels("multi", published.multi_node) if across_nodes else []
        if published.ib_write_bw_gdr_gbps is not None and size.infiniband:
            command.append(f"--ib-write-gbps={published.ib_write_bw_gdr_gbps:g}")
    if size.infiniband_hcas is not None:
        command.append(f"--hcas={size.infiniband_hcas}")
    # Plain words only (numbers, option names and Azure ML's ${{…}} placeholder): no quoting.
    return " ".join([shlex.join(module_command("training.health.gate")), *command])


def levels_text(vm_size: str, across_nodes: bool = False) -> str:
    """One line on what the gate compares with, for the dry run and `azdl cluster check`."""
    published = baseline(vm_size)
    if published is None:
        return f"{vm_size}: no published all-reduce baseline; the gate reports figures only"
    parts = []
    scopes = [("single-node", published.single_node)]
    scopes += [("multi-node", published.multi_node)] if across_nodes else []
    for scope, level in scopes:
        if level is not None:
            pairs = (("warn", level.warn_below_gbps), ("fail", level.fail_below_gbps))
            limits = [f"{name} below {value:g}" for name, value in pairs if value is not None]
            parts.append(
                f"{scope} ~{level.expected_gbps:g} GB/s ({', '.join(limits)}; {level.source})"
            )
    if published.ib_write_bw_gdr_gbps is not None:
        parts.append(f"GPUDirect RDMA loopback per InfiniBand HCA >= "
                     f"{published.ib_write_bw_gdr_gbps:g} Gb/s (NHC check_ib_bw_gdr)")  # fmt: skip
    return f"{vm_size}: " + "; ".join(parts or ["no published level for this check"])


def build_check_job(outputs: StackOutputs, nodes: int, run_id: str, experiment: str):
    """`azdl cluster check`: a job that runs the gate alone on `nodes` nodes."""
    from azure.ai.ml import MpiDistribution

    require_gpus(outputs)
    if not 1 <= nodes <= outputs.max_nodes:
        raise AzdlError(
            f"--nodes {nodes}: allowed 1 to {outputs.max_nodes}, the maximum of cluster "
            f"{outputs['clusterName']!r} (clusterMaxNodes)"
        )
    return command_job(
        outputs,
        run_id,
        experiment,
        description=f"azdl cluster check: GPU and NCCL all-reduce health gate on {nodes} node(s)",
        command=gate_step(outputs, nodes, across_nodes=True),
        environment=outputs.environment("torch"),  # both images carry nccl-tests
        instance_count=nodes,
        distribution=MpiDistribution(process_count_per_instance=outputs.vm_size.gpus),
        outputs={OUTPUT: output_folder(outputs, experiment, run_id, OUTPUT)},
        environment_variables=nccl_environment(outputs, "WARN"),
        tags={"azdl.task": "cluster-check", "azdl.nodes": str(nodes)},
    )


def verdict_lines(outputs: StackOutputs, run_id: str) -> list[str]:
    """The gate's verdict lines (`azdl-health: …`) in the job's logs."""
    from azdl.jobs.workspace import job_logs, ml_client

    return [line for line in job_logs(ml_client(outputs), run_id).splitlines()
            if line.startswith(PREFIX)]  # fmt: skip


def verdicts(outputs: StackOutputs, run_id: str) -> str:
    """The verdict lines, or a line saying there were none."""
    return "\n".join(verdict_lines(outputs, run_id)) or f"no {PREFIX} lines in the job's logs"

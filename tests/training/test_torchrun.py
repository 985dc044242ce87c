"""The PyTorch flavour under torchrun (torch.distributed, DDP) beside Horovod: real workers, 2
processes on this machine with Gloo; the same seed gives the same losses under both launchers;
a rank that never reaches a collective is named; a killed worker is restarted and the run
resumes from its last checkpoint."""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from worker_runs import TINY, launch, worker_pids, write_tiny_tfrecords

from azdl.envs import PACKAGES_ROOT
from training.throughput import parse_throughput_lines

pytestmark = pytest.mark.slow

# The averaging runs of test_torch_training: the tiny model (no batch norm), plain SGD, so both
# launchers compute the same thing; 2 accumulated micro-batches take DDP's no_sync path.
SAME = [*TINY, "--lr-decay", "none", "--base-lr", "4", "--timing-warmup-steps", "2",
        "--epochs", "3", "--steps-per-epoch", "5", "--batch-size", "4", "--grad-accum", "2",
        "--threads", "1"]  # fmt: skip


def _weights(directory: Path, rank: int = 0) -> dict[str, np.ndarray]:
    with np.load(directory / f"rank-{rank}.npz") as npz:
        return {k: npz[k] for k in npz.files}


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    root = tmp_path_factory.mktemp("launchers")
    runs = {
        launcher: launch("torch", 2, [*SAME, "--dump-weights", root / launcher], launcher)
        for launcher in ("horovod", "torchrun")
    }
    for launcher, run in runs.items():
        assert run.returncode == 0, f"{launcher}:\n{run.output}"
    return root, runs


def test_the_same_seed_gives_the_same_losses_under_both_launchers(both):
    root, runs = both
    horovod, torchrun = runs["horovod"].losses(), runs["torchrun"].losses()
    assert len(horovod) == len(torchrun) == 3, runs["torchrun"].output
    assert horovod[-1] < 0.7 * horovod[0]  # it learned, so agreement below means something
    np.testing.assert_allclose(torchrun, horovod, rtol=1e-4)
    for name, value in _weights(root / "horovod").items():
        np.testing.assert_allclose(_weights(root / "torchrun")[name], value, rtol=1e-4, atol=2e-5)


def test_torchrun_workers_stay_in_sync_and_rank0_reports(both):
    root, runs = both
    rank0, rank1 = _weights(root / "torchrun", 0), _weights(root / "torchrun", 1)
    for name in rank0:
        np.testing.assert_array_equal(rank0[name], rank1[name], err_msg=name)
    (record,) = parse_throughput_lines(runs["torchrun"].output)  # rank 0 only
    assert record["workers"] == 2 and record["grad_accum"] == 2
    assert record["timed_steps"] == 3 * 5 - 2


def test_fp16_allreduce_is_a_ddp_communication_hook(both, tmp_path):
    """--fp16-allreduce under torchrun: DDP's fp16_compress_hook. The same run with and without
    it (the `both` fixture's torchrun run) learns the same to fp16's precision, and not bit for
    bit (so the hook ran)."""
    root, runs = both
    run = launch("torch", 2, [*SAME, "--fp16-allreduce", "--dump-weights", tmp_path], "torchrun")
    assert run.returncode == 0, run.output
    np.testing.assert_allclose(run.losses(), runs["torchrun"].losses(), rtol=2e-2)
    fp16, fp32 = _weights(tmp_path), _weights(root / "torchrun")
    assert any(not np.array_equal(fp16[k], fp32[k]) for k in fp32)
    for name in fp32:
        np.testing.assert_allclose(fp16[name], fp32[name], rtol=5e-2, atol=5e-3, err_msg=name)


def azdl(*args, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """The `azdl` command as a user runs it (the operator environment), this checkout's code."""
    base = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    return subprocess.run(
        [str(PACKAGES_ROOT / ".venv" / "bin" / "python"), "-m", "azdl", *map(str, args)],
        cwd=PACKAGES_ROOT, env=base | {"PYTHONPATH": str(PACKAGES_ROOT)} | (env or {}),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
    )  # fmt: skip


# The fault, planted in rank 1 only: reading its training shard never returns (as a read from
# a hung mount on one node), so it never reaches the collective rank 0 waits in. A
# sitecustomize module on PYTHONPATH runs first in every process of the run.
HANGING_READ = """
import builtins, os, time

if os.environ.get("RANK") == "1" and os.environ.get("TORCHELASTIC_RUN_ID"):
    _open = builtins.open

    def _hanging_open(file, *args, **kwargs):
        if "train-00001-of-" in str(file):
            print(f"rank 1 hangs reading {file} at {time.time():.3f}", flush=True)
            while True:
                time.sleep(3600)
        return _open(file, *args, **kwargs)

    builtins.open = _hanging_open
"""


def test_a_rank_that_never_reaches_a_collective_is_named_within_the_timeout(tmp_path):
    data = write_tiny_tfrecords(tmp_path / "data", per_shard=8)
    (tmp_path / "fault").mkdir()
    (tmp_path / "fault" / "sitecustomize.py").write_text(HANGING_READ)
    timeout = 10
    run = azdl(
        "train", "--framework", "torch", "--launcher", "torchrun", "--workers", 2,
        "--stall-timeout", timeout, "--", *TINY, "--batch-size", 4, "--epochs", 1,
        "--data-dir", data, "--data-workers", 0,
        env={"PYTHONPATH": f"{PACKAGES_ROOT}{os.pathsep}{tmp_path / 'fault'}"}, timeout=240,
    )  # fmt: skip
    ended = time.time()
    output = run.stdout
    assert run.returncode != 0, output
    hung = float(re.search(r"rank 1 hangs reading .* at ([0-9.]+)", output).group(1))
    # Rank 0 waits `timeout` in the collective, then a few seconds for the dumps.
    assert ended - hung < timeout + 20, output
    assert "error: worker rank 0 failed first (exit code 1)" in output
    host = re.search(r"azdl: rank 1 on (\S+) \(pid", output).group(1)  # training.guard's line
    assert re.search(
        rf"azdl: rank 1 on {re.escape(host)} never reached collective \d+ \(gloo:\w+\) of "
        r"process group 0: its last was collective \d+; rank\(s\) 0 waited in it",
        output,
    ), output
    assert "ChildFailedError" not in output  # torchrun's own traceback became one line


def test_a_killed_worker_is_restarted_and_the_run_resumes_from_its_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    epochs, steps = 8, 20
    args = [*TINY, "--lr-decay", "none", "--base-lr", "1", "--timing-warmup-steps", "2",
            "--batch-size", "8", "--epochs", epochs, "--steps-per-epoch", steps,
            "--checkpoint-dir", ckpt, "--threads", "1",
            "--dump-weights", tmp_path / "w"]  # fmt: skip
    cmd = [str(PACKAGES_ROOT / ".venv" / "bin" / "python"), "-m", "azdl", "train", "--framework",
           "torch", "--launcher", "torchrun", "--workers", "2", "--max-restarts", "1", "--",
           *map(str, args)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PYTHONPATH"] = str(PACKAGES_ROOT)
    proc = subprocess.Popen(
        cmd, cwd=PACKAGES_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen, killed = [], None
    deadline = time.monotonic() + 240
    for line in proc.stdout:
        seen.append(line)
        if killed is None and re.match(r"\[0\]<stdout>:epoch 2/\d+ - loss", line):  # rank 0's
            (killed,) = worker_pids("training.torch.train", str(ckpt), "RANK=1")
            os.kill(killed, signal.SIGKILL)
        if time.monotonic() > deadline:
            proc.kill()
            break
    output = "".join(seen)
    assert proc.wait(timeout=60) == 0, output
    assert killed is not None, output
    progress = json.loads((ckpt / "progress.json").read_text())
    assert (progress["epoch"], progress["global_step"]) == (epochs, epochs * steps)
    resumed = re.search(r"resuming from \S+ckpt-(\d+)\.pt at epoch (\d+)", output)
    assert resumed, output
    assert int(resumed.group(2)) >= 2  # at least the epochs before the kill were kept
    assert f"epoch {epochs}/{epochs} - loss" in output
    # The ledger azdl train prints: the restart round resumed from the checkpoint it named.
    restored = re.search(r"restore: local-\S+ round \d+ resumed from step (\d+)", output)
    assert restored and int(restored.group(1)) == int(resumed.group(2)) * steps, output
    assert re.search(rf"last step {epochs * steps}; steps recomputed: \d+", output), output
    rank0, rank1 = _weights(tmp_path / "w", 0), _weights(tmp_path / "w", 1)
    for name in rank0:
        np.testing.assert_array_equal(rank0[name], rank1[name], err_msg=name)


def test_a_plain_ddp_script_runs_unchanged_under_azdl_train(tmp_path):
    """examples/torchrun/ddp_minimal.py, written as PyTorch's DDP tutorial writes it (env://),
    on 2 local workers under the default launcher (issue 35, trap A): azdl reads the script and
    starts it under torchrun, saying so; its folders come from azdl."""
    script = PACKAGES_ROOT / "examples" / "torchrun" / "ddp_minimal.py"
    run = azdl("train", "--workers", 2, "--script", script,
               "--run-dir", tmp_path / "run", "--", "--epochs", 2,
               "--checkpoint", "{checkpoint_dir}/model.pt", timeout=240)  # fmt: skip
    assert run.returncode == 0, run.stdout
    assert "azdl: launcher torchrun: ddp_minimal.py calls init_process_group (env://)" in (
        run.stdout
    )
    assert re.search(r"rank 0 of 2: epoch 2 loss [0-9.]+", run.stdout), run.stdout
    assert (tmp_path / "run" / "checkpoints" / "model.pt").is_file()


def test_a_torchrun_jobs_command_runs_as_two_nodes_on_this_machine(tmp_path):
    """The command `azdl submit --launcher torchrun` gives each node's one process, run here
    twice as Azure ML would run it on 2 CPU nodes (1 worker each): its ${{...}} placeholders
    filled in, NODE_RANK, MASTER_ADDR and MASTER_PORT set (Azure ML's, for distribution:
    pytorch), the job's environment variables. torchrun's c10d rendezvous is hosted by node 0."""
    import socket

    from azdl.envs import training_env
    from azdl.jobs import safeguards
    from azdl.jobs.request import JobRequest
    from azdl.jobs.spec import training_command
    from azdl.launchers import TORCHRUN_ENV
    from infra.catalogue import VM_SIZES

    args = (*TINY, "--batch-size", "4", "--epochs", "1", "--steps-per-epoch", "4",
            "--timing-warmup-steps", "1")  # fmt: skip
    request = JobRequest("torch", 2, "synthetic", "rehearsal", args, launcher="torchrun")
    env, guard = safeguards.job_safeguards(request, VM_SIZES["Standard_D4s_v3"])
    command = training_command(request, threads=1, guard=guard, per_node=1)
    for name in ("checkpoints", "logs"):
        (tmp_path / name).mkdir()
        command = command.replace("${{outputs." + name + "}}", str(tmp_path / name))
    assert "${{" not in command
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    nodes = [
        subprocess.Popen(
            ["bash", "-c", command], cwd=PACKAGES_ROOT,
            env=training_env(env | TORCHRUN_ENV | {
                "NODE_RANK": str(node), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                "AZUREML_RUN_ID": "rehearsal", "OMP_NUM_THREADS": "1",
            }),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for node in (0, 1)
    ]  # fmt: skip
    outputs = [node.communicate(timeout=300)[0] for node in nodes]
    for node, output in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, output
    # Global rank 0 prints the throughput line. torchrun's c10d rendezvous numbers the nodes in
    # the sorted order of their descriptors (host name, pid), not by NODE_RANK
    # (dynamic_rendezvous.py, torch 2.13.0: `enumerate(sorted(state.participants))`), so rank 0
    # may be on either node: exactly one of the two prints it.
    (record,) = [r for output in outputs for r in parse_throughput_lines(output)]
    assert record["workers"] == 2 and record["timed_steps"] == 3
    assert sorted(p.name for p in (tmp_path / "logs" / "ranks").glob("rank-*.json")) == [
        "rank-0.json", "rank-1.json",
    ]  # fmt: skip
    assert json.loads((tmp_path / "checkpoints" / "progress.json").read_text())["epoch"] == 1

"""Each rank's guard writes its exit record (training.exits) when its command ends: the script's
own exception, a signal nobody in the job sent, or its launcher's stop; and, under torchrun, the
rank's error file, which torch's own reader takes as the worker's root cause."""

import json
import signal
import time

import pytest

from tests.training import stand_ins
from tests.training.guarded import run_guarded
from training import exits

pytestmark = pytest.mark.slow


def the_record(run) -> exits.Record:
    (record,) = exits.parse(run.stderr)
    return record


def test_the_scripts_exception_is_recorded_and_given_to_torchrun(tmp_path, monkeypatch):
    error_file = tmp_path / "attempt_0" / "0" / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    code = "raise ValueError('planted: bad batch')"
    before = time.time()
    run, _ = run_guarded(tmp_path, code)
    assert run.returncode == 1, run.stderr
    record = the_record(run)
    assert (record.rank, record.round, record.kind, record.exit) == (1, 2, exits.USER, 1)
    assert record.line == "ValueError: planted: bad batch"
    assert before <= record.time <= time.time()
    saved = json.loads((tmp_path / "ranks" / "exit-1-round-2.json").read_text())
    assert exits.Record(**saved) == record
    # torch's own reader of a worker's error file (what torchrun's "Root Cause" prints).
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    failure = ProcessFailure(local_rank=0, pid=1, exitcode=1, error_file=str(error_file))
    assert failure.message["message"] == "ValueError: planted: bad batch"
    assert failure.timestamp == int(record.time)


def test_an_error_file_the_script_wrote_itself_is_read(tmp_path, monkeypatch):
    """A script under torch's `errors.record` writes its own error file; the guard reads it
    (here the script prints nothing, so the file is the only sign)."""
    error_file = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    code = (
        "import sys\n"
        "from torch.distributed.elastic.multiprocessing.errors import ErrorHandler\n"
        "try:\n    raise KeyError('labels')\n"
        "except KeyError as e:\n    ErrorHandler().record_exception(e)\n"
        "sys.exit(1)\n"
    )
    run, _ = run_guarded(tmp_path, code)
    record = the_record(run)
    assert (record.kind, record.line) == (exits.USER, "KeyError: 'labels'")


def test_a_killed_command_and_a_launchers_stop_are_told_apart(tmp_path):
    killed, _ = run_guarded(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    record = the_record(killed)
    assert (record.kind, record.signal, record.exit) == (exits.KILLED, "SIGKILL", 137)
    stopped, _ = run_guarded(tmp_path, "import time\ntime.sleep(60)", signal_after=3)
    record = the_record(stopped)
    assert (record.kind, record.signal) == (exits.STOPPED, signal.Signals.SIGTERM.name)


def test_a_finished_command_has_a_finished_record(tmp_path):
    run, _ = run_guarded(tmp_path, "print('done')")
    assert run.returncode == 0
    assert the_record(run).kind == exits.FINISHED


@pytest.mark.parametrize(
    ("gpus", "remaps", "found"),
    [
        ("nvidia_smi_ok.txt", "nvidia_smi_remaps_ok.txt", []),
        ("nvidia_smi_seven_gpus.txt", "nvidia_smi_remaps_ok.txt",
         ["7 GPUs visible, the VM size has 8"]),
        ("nvidia_smi_ok.txt", "nvidia_smi_remap_pending.txt",
         ["GPU 00000008:00:00.0: a row remap is pending (reset the GPU or reboot the node before "
          "using it)"]),
    ],
)  # fmt: skip
def test_after_a_failure_the_post_mortem_checks_the_nodes_gpus(tmp_path, monkeypatch, gpus,
                                                              remaps, found):  # fmt: skip
    tools = stand_ins.nvidia_smi(tmp_path / "bin", gpus=gpus, remaps=remaps)
    monkeypatch.setenv("PATH", stand_ins.on_path(tools))
    run, _ = run_guarded(tmp_path, "raise RuntimeError('CUDA error: unknown error')",
                         "--post-mortem-gpus", "8")  # fmt: skip
    assert the_record(run).post_mortem == found


def test_a_post_mortem_without_nvidia_smi_says_so(tmp_path):
    run, _ = run_guarded(tmp_path, "raise SystemExit(1)", "--post-mortem-gpus", "8")
    assert the_record(run).post_mortem == [
        "nvidia-smi failed (exit 127): nvidia-smi: not found in this image"
    ]

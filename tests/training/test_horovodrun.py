"""training/horovodrun.py: horovodrun with its Gloo check read from the extension's library
(no TensorFlow import in the launcher); the answer is Horovod's own, and Horovod's own check
answers where a library does not load. Two real workers start through it in the other tests
(azdl.local.launch_command)."""

import subprocess

import pytest

from azdl import local
from azdl.envs import PACKAGES_ROOT, training_bin, training_env
from azdl.runtime import module_command

CHECK = """
import sys
from horovod.common import util
from training import horovodrun
horovod_says = util.gloo_built()
{plant}
util.gloo_built = lambda verbose=False: print("Horovod's own check") or horovod_says
print(horovodrun.gloo_built(), horovod_says, "tensorflow" in sys.modules, "torch" in sys.modules)
"""


def _run(code: str) -> list[str]:
    """`code`'s output lines, run by the training environment's Python."""
    proc = subprocess.run(
        [str(training_bin("python")), "-c", code],
        cwd=PACKAGES_ROOT, env=training_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def _check(plant: str = "") -> list[str]:
    return _run(CHECK.format(plant=plant))


def test_the_gloo_flag_comes_from_the_library_with_no_framework_imported():
    # Horovod's check forks and imports the extension there: the parent's modules stay clean.
    assert _check() == ["True True False False"]


def test_each_flag_read_is_the_one_horovod_reports():
    """Gloo and MPI built, NCCL not (the set-up's CPU build): a flag read from the wrong
    function, or no flag read at all, differs somewhere."""
    code = (
        "from horovod.common import util; from training.horovodrun import read_flag; "
        "print([(read_flag(f), bool(getattr(util, f + '_built')())) for f in "
        "('gloo', 'mpi', 'nccl')])"
    )
    assert _run(code) == ["[(True, True), (True, True), (False, False)]"]


@pytest.mark.parametrize(
    "plant",
    [
        'horovodrun.FRAMEWORK_LIBRARIES["tensorflow"] = ("libnot-there.so",)',
        "horovodrun._library = lambda extension: None",
    ],
)
def test_where_no_library_loads_horovods_own_check_answers(plant):
    assert _check(plant) == ["Horovod's own check", "True True False False"]


def test_a_local_horovod_run_starts_through_it():
    cmd = local.launch_command("keras", 2, "horovod", ["--epochs", "1"])
    python = str(training_bin("python"))
    assert cmd[: cmd.index("--gloo")] == module_command("training.horovodrun", python)

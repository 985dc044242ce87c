"""A script that destroys its process group while its DDP model still holds it (the shape of
PyTorch's DDP tutorial, pytorch/tutorials intermediate_source/ddp_tutorial.rst, read
2026-11-29) is named in one warning line by `azdl submit` and `azdl train`, through the CLI as
a user calls it; the example that trains in a function of its own is not. Why it can hang:
docs/torchrun.md, "Ending cleanly"; the hang itself on real workers: benchmarks/teardown_stress.py
and tests/training/test_teardown.py."""

import textwrap

import pytest

from azdl.cli import main
from azdl.envs import PACKAGES_ROOT

# The tutorial's torchrun script (its elastic_ddp.py): one function builds the model and, at its
# end, destroys the group.
ONE_FUNCTION = """\
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def demo_basic():
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(10, 5))
    model(__import__("torch").randn(20, 10)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    demo_basic()
"""
# The tutorial's first script: the same, through a cleanup() of its own.
THROUGH_CLEANUP = """\
import torch.distributed as dist
import torch.nn.parallel


def cleanup():
    dist.destroy_process_group()


def main():
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(10, 5))
    model(torch.randn(20, 10)).sum().backward()
    cleanup()


main()
"""
# The same, with the model dropped before the group: the cure, said nothing about.
DROPPED_FIRST = ONE_FUNCTION.replace(
    "    dist.destroy_process_group()", "    del model\n    dist.destroy_process_group()"
)
HAZARD = (
    "the model keeps the group until it goes, and the group then dies holding the GIL, which can "
    "hang the worker at exit; destroy it after the model is gone, e.g. once a function that "
    'trains has returned (docs/torchrun.md, "Ending cleanly")'
)
EXPECTED = {
    ONE_FUNCTION: "script.py line 10: destroy_process_group() in demo_basic(), which builds "
    f"DistributedDataParallel (line 8): {HAZARD}",
    THROUGH_CLEANUP: "script.py line 13: destroy_process_group() (through cleanup()) in main(), "
    f"which builds DistributedDataParallel (line 11): {HAZARD}",
}


def write(tmp_path, source: str):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(source))
    return path


@pytest.mark.parametrize("source", [ONE_FUNCTION, THROUGH_CLEANUP], ids=["one", "cleanup"])
def test_submit_names_the_destroy_that_the_model_outlives(outputs_file, tmp_path, capsys, source):
    script = write(tmp_path, source)
    code = main(["submit", "--outputs", str(outputs_file()), "--script", str(script),
                 "--storage", "synthetic", "--export", str(tmp_path / "job.yml")])  # fmt: skip
    assert code == 0
    assert f"warning: {EXPECTED[source]}\n" in capsys.readouterr().err


def test_train_names_it_before_anything_runs(tmp_path, capsys):
    """Said before the run's folders are made: here a --run-dir that is a file stops the run
    right after, so no worker starts."""
    script = write(tmp_path, ONE_FUNCTION)
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    code = main(["train", "--script", str(script), "--run-dir", str(not_a_folder)])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and f"warning: {EXPECTED[ONE_FUNCTION]}" in err, err
    assert err[-1].startswith("error: --run-dir"), err


@pytest.mark.parametrize("cured", ["example", "del"])
def test_a_script_whose_model_goes_first_is_not_named(outputs_file, tmp_path, capsys, cured):
    """The example trains in a function of its own; the other drops the model with `del`."""
    script = PACKAGES_ROOT / "examples" / "torchrun" / "ddp_minimal.py"
    if cured == "del":
        script = write(tmp_path, DROPPED_FIRST)
    code = main(["submit", "--outputs", str(outputs_file()), "--script", str(script),
                 "--storage", "synthetic", "--export", str(tmp_path / "job.yml")])  # fmt: skip
    assert code == 0 and "warning:" not in capsys.readouterr().err

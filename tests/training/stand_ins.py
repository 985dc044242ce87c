"""Stand-ins for a GPU node's tools on PATH, printing recorded output in the tools' own formats
(tests/jobs/data/nccl, README there): what a test of the gate's or the guard's nvidia-smi
checks runs on a machine without GPUs. A stand-in may answer differently on one host (a node
whose GPU is gone), or only once a fault's marker file exists (a GPU lost after a crash)."""

import os
import stat
from pathlib import Path

RECORDED = Path(__file__).parents[1] / "jobs" / "data" / "nccl"
FAULT_TIMES = "fault-times"  # where a stand-in notes when it first gave a faulty answer


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def nvidia_smi(folder: Path, gpus: str = "nvidia_smi_ok.txt",
               remaps: str = "nvidia_smi_remaps_ok.txt", bad_host: str | None = None,
               bad_gpus: str | None = None, after: Path | None = None,
               marks: Path | None = None) -> Path:  # fmt: skip
    """An `nvidia-smi` in `folder` that answers the GPU query and the row-remapper query
    (training/health/nvidia_smi.py) with the recorded files; on `bad_host` (once `after`
    exists, if given) the GPU query answers with `bad_gpus`, and the time goes to `marks`.
    Returns the folder, to put first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    bad = ""
    if bad_host is not None:
        when = f' && [ -e "{after}" ]' if after else ""
        note = f'date +%s.%N >> "{marks}"; ' if marks else ""
        bad = (f'if [ "$(hostname)" = "{bad_host}" ]{when}; then {note}'
               f'cat "{RECORDED / bad_gpus}"; exit 0; fi; ')  # fmt: skip
    _script(folder / "nvidia-smi", (
        "#!/bin/sh\n"
        'case "$1" in\n'
        f'  --query-gpu=*) {bad}cat "{RECORDED / gpus}" ;;\n'
        f'  --query-remapped-rows=*) cat "{RECORDED / remaps}" ;;\n'
        '  *) echo "stand-in nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;\n'
        "esac\n"
    ))  # fmt: skip
    return folder


def all_reduce_perf(folder: Path, output: str = "single_node_pass.txt") -> Path:
    """nccl-tests' single-node `all_reduce_perf`, printing a recorded run (8 GPUs of an ND
    H100 v5, above the published level)."""
    folder.mkdir(parents=True, exist_ok=True)
    _script(folder / "all_reduce_perf", f'#!/bin/sh\ncat "{RECORDED / output}"\n')
    return folder


def on_path(folder: Path) -> str:
    return f"{folder}{os.pathsep}{os.environ['PATH']}"

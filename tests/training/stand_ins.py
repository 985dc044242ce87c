"""Stand-ins for the GPU node's tools on PATH, printing recorded output in the tools' own
formats (tests/jobs/data/nccl, README there): what a test of the gate's or the guard's nvidia-smi
checks runs on a machine without GPUs."""

import os
import stat
from pathlib import Path

RECORDED = Path(__file__).parents[1] / "jobs" / "data" / "nccl"


def nvidia_smi(folder: Path, gpus: str = "nvidia_smi_ok.txt",
               remaps: str = "nvidia_smi_remaps_ok.txt", after: Path | None = None,
               gpus_after: str | None = None) -> Path:  # fmt: skip
    """An `nvidia-smi` in `folder` that answers the GPU query and the row-remapper query
    (training/health/nvidia_smi.py) with the recorded files; once `after` exists (a fault's
    marker), the GPU query answers with `gpus_after` (a GPU lost after a crash). Returns the
    folder, to put first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    later = (
        f'if [ -e "{after}" ]; then cat "{RECORDED / gpus_after}"; exit 0; fi\n' if after else ""
    )
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f'  --query-gpu=*) {later.strip()}\n    cat "{RECORDED / gpus}" ;;\n'
        f'  --query-remapped-rows=*) cat "{RECORDED / remaps}" ;;\n'
        '  *) echo "stand-in nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;\n'
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def on_path(folder: Path) -> str:
    return f"{folder}{os.pathsep}{os.environ['PATH']}"

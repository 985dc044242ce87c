"""`horovodrun` as a local run starts it (azdl.launchers.local_horovodrun), less ~4 s a launch.

Before it starts a worker, horovodrun asks whether Horovod was built with Gloo by importing a
framework's extension in a forked process, TensorFlow's first (horovod/common/util.py
`gloo_built`, `_check_extension_lambda`, `EXTENSIONS`; Horovod 0.28.1): all of TensorFlow is
imported for one flag, 4.5 s of a core on this machine (2026-11-29). The flag is one C function
in the extension's library, `horovod_gloo_built` (horovod/common/basics.py `gloo_built`); here
it is read from that library loaded with ctypes, the framework's own libraries it links against
loaded first, without importing the framework: 0.4 s. Where a library does not load, Horovod's
own check answers. Everything else is horovodrun's (`horovod.runner.launch.run_commandline`).
"""

import ctypes
import importlib.util
from pathlib import Path

import horovod
from horovod.common import util
from horovod.runner import launch

# What each extension's library needs loaded before it, from its framework's package folder:
# TensorFlow's extension names these two (readelf -d: NEEDED), found by the framework's import;
# torch's finds its own.
FRAMEWORK_LIBRARIES = {"tensorflow": ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2")}


def _library(extension: str) -> Path | None:
    """The extension's library in the installed Horovod, or None where it was not built."""
    name = "mpi_lib_v2" if extension == "torch" else "mpi_lib"
    path = Path(util.get_extension_full_path(horovod.__file__, extension, name))
    return path if path.is_file() and importlib.util.find_spec(extension) else None


def read_flag(name: str) -> bool | None:
    """`horovod_<name>_built()` of the first extension whose library exists, in Horovod's order;
    None where that library does not load."""
    for extension in util.EXTENSIONS:
        library = _library(extension)
        if library is None:
            continue
        try:
            (folder,) = importlib.util.find_spec(extension).submodule_search_locations
            for needed in FRAMEWORK_LIBRARIES.get(extension, ()):
                ctypes.CDLL(str(Path(folder) / needed), mode=ctypes.RTLD_GLOBAL)
            loaded = ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
            return bool(getattr(loaded, f"horovod_{name}_built")())
        except (OSError, AttributeError, ValueError):
            return None
    return None


def gloo_built(verbose: bool = False) -> bool:
    """Horovod's `gloo_built`, from the library; Horovod's own check where it does not load."""
    answer = read_flag("gloo")
    return util.gloo_built(verbose=verbose) if answer is None else answer


if __name__ == "__main__":
    launch.gloo_built = gloo_built
    launch.run_commandline()

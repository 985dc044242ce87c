"""A job on a team's own Azure ML environment (`azdl submit --environment NAME@VERSION`) instead
of azdl's image: the reference azure-ai-ml takes, and the first step of the job's command, which
ends the job at once, in one line, when that environment lacks the azdl runtime modules the
command runs (docs/jobs.md, "Your own environment"). Stdlib only: the CLI checks the option
before anything loads."""

import importlib.metadata
import re
import shlex

from azdl.errors import AzdlError
from azdl.runtime import SAFE_PATH

# NAME@VERSION. azure-ai-ml (1.35.2, constants/_common.py and _utils/_arm_id_utils.py) writes a
# workspace asset as `azureml:NAME:VERSION` (ARM_ID_PREFIX, VERSIONED_RESOURCE_NAME), reads
# `NAME@LABEL` as a label and refuses a '/' in a name: so neither part may hold ':', '@' or '/'.
# Names: a letter or digit first, then letters, digits, '-', '_' and '.' (azdl's own are
# azdl-pytorch and azdl-tensorflow), at most 255 characters (Azure/azureml-assets' naming
# convention); whether the environment exists, the workspace says at submission.
_REFERENCE = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,254})@(?P<version>[A-Za-z0-9._-]+)")
# The exit code of a job whose environment lacks azdl's runtime: sysexits.h's EX_CONFIG (a
# configuration error), apart from the guard's own (training/exits.py: 3, 4).
MISSING_RUNTIME_EXIT = 78
# The first words of the one line such a job prints.
MISSING_RUNTIME = "azdl: this environment lacks the azdl runtime"
MISSING_TOPOLOGY = "azdl: this environment lacks the NCCL topology file"
# A module a command runs: `python -c SAFE_PATH MODULE` (azdl.runtime) or `python -m MODULE` (a
# built-in script's entry); azdl's runtime is the `training` package.
_RUN = re.compile(
    rf"(?:{re.escape(shlex.quote(SAFE_PATH))}|\bpython -m) (?P<module>training(?:\.\w+)*)\b"
)


def parse(text: str) -> str:
    """`NAME@VERSION` as given, or one error line naming what is allowed."""
    if not _REFERENCE.fullmatch(text):
        raise AzdlError(
            f"--environment {text!r}: expected NAME@VERSION of an Azure ML environment in the "
            "stack's workspace (e.g. team-pytorch@3): NAME a letter or digit, then letters, "
            "digits, '-', '_' or '.'; VERSION letters, digits, '-', '_' or '.'"
        )
    return text


def azureml_reference(name_at_version: str) -> str:
    """The reference a job's `environment` takes for a workspace environment's version (Azure
    ML CLI v2 and azure-ai-ml: `azureml:NAME:VERSION`)."""
    match = _REFERENCE.fullmatch(parse(name_at_version))
    return f"azureml:{match['name']}:{match['version']}"


def install_hint() -> str:
    """What a team installs into its environment: the azdl release of this CLI, without its
    operator-side dependencies (the runtime's modules import only the standard library, and
    torch or mlflow where the script has them)."""
    return f"pip install --no-deps azdl=={importlib.metadata.version('azdl')}"


def runtime_modules(command: str) -> list[str]:
    """The azdl runtime modules (the `training` package) a job's shell command runs, in order
    of first use."""
    return list(dict.fromkeys(m["module"] for m in _RUN.finditer(command)))


def probe_step(command: str) -> str:
    """The shell step that checks, with the working directory off sys.path as the runtime runs,
    that every runtime module `command` runs can be imported, and otherwise prints one line
    (what is missing and how to fix it) and ends the job with MISSING_RUNTIME_EXIT."""
    modules = runtime_modules(command)
    message = (
        f"{MISSING_RUNTIME} (missing: {{}}): install it into the environment with "
        f"{install_hint()}, or submit without --environment"
    )
    # A module is found when each package above it is (find_spec imports the parents). No single
    # quote inside: the command quotes this code in single quotes.
    code = (
        "import importlib.util as u, sys; sys.path[:] = filter(None, sys.path); "
        'missing = [m for m in sys.argv[1:] if not all(u.find_spec(m.rsplit(".", n)[0]) '
        'for n in range(m.count("."), -1, -1))]; '
        f'missing and sys.exit("{message}".format(", ".join(missing)))'
    )
    return shlex.join(["python", "-c", code, *modules]) + f" || exit {MISSING_RUNTIME_EXIT}"


def topology_step(path: str) -> str:
    """The shell step that ends the job in one line when the environment lacks the NCCL topology
    file the job's VM size needs at `path` (training.nccl_topology: azdl's images hold it)."""
    message = (
        f"{MISSING_TOPOLOGY} {path}, which NCCL needs on this VM size (docs/architecture.md, "
        "NCCL topology files): add it as the nccl-topology step of training/install/"
        "image-steps.sh does, or submit without --environment"
    )
    stop = f"{{ echo {shlex.quote(message)} >&2; exit {MISSING_RUNTIME_EXIT}; }}"
    return f"test -f {shlex.quote(path)} || {stop}"

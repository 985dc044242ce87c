"""How azdl starts the modules of its runtime, the `training` package (the guard, the health gate,
the copy step, the flight-recorder report, the rank labeller, and pip), in a job and on this
machine, so that the folder they run in cannot shadow them.

`python -m training.guard` puts the working directory first on sys.path. A `--script` job runs
in its uploaded code folder, and a code folder with a top-level `training/` package of its own
(a common layout) shadows azdl's there: `No module named training.guard`, in every job (issue
35). Python 3.11's `-P` would leave the working directory out, but both images run Ubuntu
22.04's Python 3.10 (images/*/Dockerfile), which stops at it: "Unknown option: -P" (measured
with CPython 3.10.13). So such a module runs through `python -c`, whose code takes the working
directory's entry, '', off sys.path and then runs the module as `-m` does: as `__main__`, with
sys.argv[0] its file (runpy.run_module, `alter_sys`; both in 3.10's library). The image's
PYTHONPATH, /opt/azdl (locally the repository's), then finds azdl's own package.

The user's script is not affected: `python FILE` puts the script's own folder first on sys.path,
so it finds its own packages, as it would anywhere. The built-in scripts' entry modules keep
`python -m`: they run only in jobs that upload no code, and locally in the repository."""

# The code `python -c` runs: '' (the working directory, which -c puts first) off sys.path, then
# the module named after it as __main__, with the arguments after that.
SAFE_PATH = (
    "import runpy, sys; sys.path[:] = filter(None, sys.path); "
    'runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)'
)


def module_command(module: str, python: str = "python") -> list[str]:
    """The words that run `python -m MODULE` with the working directory off sys.path; the
    module's own arguments follow them."""
    return [python, "-c", SAFE_PATH, module]

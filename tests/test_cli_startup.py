"""`azdl --help` and the refusal of bad input load no library they do not use: a command module
imports at its top only what its parser needs, the rest where the work is done (azdl/cli.py).
Checked by what a fresh interpreter has imported after each case, not by a wall-clock time;
the times are in benchmarks/results/cli_latency.md."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "docs/stack-outputs.example.json"
# What a help or a refusal may load from outside the standard library and the project: the
# stack and price files are YAML, the completion script comes from shtab.
LIGHT = {"yaml", "_yaml", "shtab"}
# The converter's own modules import its image and record libraries (no rich, no NumPy).
CONVERTER = {"PIL", "google", "google_crc32c"}
# Reading stack outputs or a stack file validates them with their pydantic models.
MODELS = {"pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection"}

# (arguments after `azdl`, exit code, what else the case may load)
CASES = [
    (["--help"], 0, set()),
    (["--version"], 0, set()),
    (["submit", "--help"], 0, set()),
    (["plna"], 2, set()),
    (["plan", "nosuch"], 2, set()),
    (["plan", "dev", "--images-per-epoch", "0"], 2, set()),
    (["diff", "dev"], 2, set()),
    (["policy", "dev", "--json", "--list"], 2, set()),
    (["submit", "--outputs", EXAMPLE, "--nodes", "0"], 2, set()),
    (["submit", "--outputs", EXAMPLE, "--script", "nowhere.py"], 2, set()),
    (["train", "--epochs", "3"], 2, set()),
    (["train", "--workers", "0"], 2, set()),
    (["estimate", "--budget", "-1"], 2, set()),
    (["estimate", "--vm-size", "Standard_X"], 2, set()),
    (["data", "stage", "/nowhere", "--outputs", EXAMPLE], 2, set()),
    (["data", "prepare", "--input", "/nowhere", "--output", "/nowhere-out"], 2, CONVERTER),
    (["jobs", "show", "no good", "--outputs", EXAMPLE], 2, set()),
    (["bench", "--local", "--workers", "0,1"], 2, set()),
    (["cluster", "check", "--nodes", "0"], 2, set()),
    (["submit", "--outputs", EXAMPLE, "--nodes", "99"], 2, MODELS),
]

PROBE = textwrap.dedent(
    """
    import contextlib, io, json, sys, sysconfig
    from pathlib import Path

    AT_START = set(sys.modules)  # the interpreter's own start-up (site, .pth hooks)
    PACKAGES = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}

    from azdl.cli import main

    def third_party():
        found = set()
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if name in AT_START:
                continue
            if path and any(p in Path(path).resolve().parents for p in PACKAGES):
                found.add(name.split(".")[0])
        return found

    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        results.append({"code": code, "loaded": sorted(third_party()), "err": err.getvalue()})
    print(json.dumps(results))
    """
)


def probe(cases: list[list[str]]) -> list[dict]:
    """Run the cases in order in one fresh interpreter: each one's exit code, stderr, and the
    third-party packages loaded once it is done."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(cases)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_help_and_refusals_load_only_what_they_use():
    """The cases that may load nothing heavy run in one interpreter, in order: the first one
    to load a package is the one named. The others each get their own."""
    light = [case for case in CASES if not case[2]]
    results = probe([argv for argv, _, _ in light])
    for (argv, code, _), got in zip(light, results, strict=True):
        assert got["code"] == code, (argv, got["err"])
        assert "Traceback" not in got["err"], (argv, got["err"])
        extra = set(got["loaded"]) - LIGHT
        assert not extra, f"azdl {' '.join(argv)} loaded {sorted(extra)}"
    for argv, code, allowed in (case for case in CASES if case[2]):
        (got,) = probe([argv])
        assert got["code"] == code, (argv, got["err"])
        extra = set(got["loaded"]) - LIGHT - allowed
        assert not extra, f"azdl {' '.join(argv)} loaded {sorted(extra)}"


def test_the_probe_sees_a_heavy_library_where_one_is_used(tmp_path):
    """A plot needs matplotlib: the probe must see it (else it proves nothing)."""
    plot = tmp_path / "cost.png"
    argv = ["estimate", "--vm-size", "Standard_ND96isr_H100_v5", "--plot", str(plot)]
    (got,) = probe([argv])
    assert got["code"] == 0, got["err"]
    assert "matplotlib" in got["loaded"] and plot.is_file()

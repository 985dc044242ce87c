"""The smoke run's stand-in for the GPU image's packages: the pinned distributions, and what they
need, linked from the environment this interpreter runs in (the training environment that
`make setup` installed from the same pins) into a fresh one's site-packages.

    .venv-train/bin/python benchmarks/gpu/link_pins.py SITE_PACKAGES NAME==VERSION...

It stops, linking nothing, if a pin is not what is installed here. What the fresh environment
holds already (pip, setuptools, wheel at the images' pins) stays its own. A pip install of the same
wheels took 52 s, most of it unpacking and compiling torch; linking takes under a second, and
the linked files keep their compiled bytecode (2026-11-29, this machine).
"""

import sys
from importlib.metadata import PackageNotFoundError, distribution, distributions
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def closure(names: list[str], present: set[str]) -> dict:
    """Each named distribution and every one it requires (no extras), by canonical name, less
    those `present` already."""
    found, todo, env = {}, list(names), {**default_environment(), "extra": ""}
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found or name in present:
            continue
        found[name] = dist = distribution(name)
        for line in dist.requires or ():
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return found


def top_level(dist) -> set[str]:
    """The site-packages entries a distribution installed (its RECORD), scripts and the shared
    __pycache__ of single-file modules left out."""
    entries = {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..")}
    return entries - {"__pycache__"}


def main(site: str, pins: list[str]) -> int:
    wrong, wanted = [], [Requirement(pin) for pin in pins]
    for req in wanted:
        try:
            installed = distribution(req.name).version
        except PackageNotFoundError:
            installed = "not installed"
        # PEP 440: ==2.13.0 holds for the CPU build's 2.13.0+cpu (a local version label).
        if not req.specifier.contains(installed, prereleases=True):
            wrong.append(f"{req.name} {installed}, pinned {req.specifier}")
    if wrong:
        print(f"error: {sys.prefix} does not hold the pins: {'; '.join(wrong)}", file=sys.stderr)
        return 1
    target = Path(site)
    present = {canonicalize_name(d.metadata["Name"]) for d in distributions(path=[site])}
    dists = closure([req.name for req in wanted], present)
    for dist in dists.values():
        source = Path(dist.locate_file(""))
        for entry in sorted(top_level(dist)):
            link = target / entry
            if not link.exists():
                link.symlink_to(source / entry)
    names = ", ".join(f"{d.metadata['Name']} {d.version}" for d in dists.values())
    print(f"linked from {sys.prefix}: {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))

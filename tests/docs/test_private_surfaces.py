"""The upgrade hazards: every private surface of another package that the product code touches is
listed (docs/hooks/private_surfaces.yaml) with why and what to check, and nothing listed is
stale. The scan reads the code with `ast`; it imports nothing of the product."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import private_surfaces  # noqa: E402

FIX = f"list it in {private_surfaces.LIST_FILE.relative_to(ROOT)}, with why and what to check"


@pytest.fixture(scope="module")
def uses() -> list[private_surfaces.Use]:
    return private_surfaces.scan()


def test_the_scan_reads_every_product_package(uses):
    scanned = {Path(u.file).parts[0] for u in uses}
    assert {"azdl", "infra", "training", "policies", "docs", "scripts"} <= scanned
    assert not any(u.file.startswith("tests/") for u in uses)


def test_every_private_surface_the_code_touches_is_listed(uses):
    missing = private_surfaces.unlisted(uses, private_surfaces.listed())
    assert missing == [], "\n".join(f"{u.file}:{u.line}: {u.name}: {FIX}" for u in missing)


def test_every_listed_surface_is_still_touched(uses):
    assert private_surfaces.unused(uses, private_surfaces.listed()) == [], "no code uses these"


def test_each_entry_says_why_and_what_to_check_on_an_upgrade():
    surfaces = private_surfaces.listed()
    assert surfaces
    for s in surfaces:
        assert s.package and s.names and s.why and s.check, s


PLANTED = """
import argparse, logging
from azure.ai.ml._utils import _asset_utils
from pulumi.runtime import rpc
from pulumi.runtime.sync_await import _sync_await
from azdl import cli


class Own:
    def __init__(self):
        self._mine = 1

    def read(self, parser, job):
        logging.getLogger("azure.ai.ml._utils._experimental")
        hasattr(job, "_to_job")
        return parser._actions, rpc._special_sig_key, self._mine, cli._internal, "_cmyk.JPEG"
"""


def test_the_scan_finds_each_form_of_private_use():
    """Each form in one planted module, beside the project's own private names (an attribute it
    sets, one of its modules' names) and a string that only looks dotted."""
    tree = ast.parse(PLANTED)
    own = private_surfaces.own_modules(private_surfaces.product_files())
    found = private_surfaces.uses_in(tree, "planted.py", own, private_surfaces.own_names([tree]))
    assert sorted(u.name for u in found if u.private) == [
        "._actions",
        "._to_job",
        "azure.ai.ml._utils._asset_utils",
        "azure.ai.ml._utils._experimental",
        "pulumi.runtime.rpc._special_sig_key",
        "pulumi.runtime.sync_await._sync_await",
    ]

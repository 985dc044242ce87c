"""azdl's guardrails as CrossGuard policies, one module per concern; `POLICIES` lists them all.

Run by Pulumi (`pulumi preview --policy-pack policies`: `policies/__main__.py` builds the
PolicyPack) and offline (`azdl policy STACK|MANIFEST`: azdl/review/policy.py). How the pack is
laid out and loaded: docs/architecture.md, "Policies".
"""

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # Pulumi runs the pack with only policies/ on the path
    sys.path.insert(0, str(REPO_ROOT))

# Importing a module declares its policies: POLICIES lists them in this import order.
from . import storage, registry, workspace, compute, network  # noqa: E402, F401, I001
from . import access, tags, diagnostics, cost, ordering  # noqa: E402, F401
from .pack import POLICIES  # noqa: E402

__all__ = ["POLICIES"]

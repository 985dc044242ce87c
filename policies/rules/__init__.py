"""azdl's guardrails as CrossGuard policies, one module per concern; `POLICIES` lists them all.

Run by Pulumi (`pulumi preview --policy-pack policies`: `policies/__main__.py` builds the
PolicyPack) and offline (`azdl policy STACK|MANIFEST`: azdl/review/policy.py). How the pack is
laid out and loaded: docs/architecture.md, "Policies".
"""

import sys
from pathlib import Path

# Pulumi runs the pack with only policies/ on the path: azdl and infra are imported from the
# folder that holds the pack, where they sit beside it (a checkout's root, or the site-packages
# the wheel installed them into), never from another copy.
PACKAGES_ROOT = Path(__file__).resolve().parents[2]
if str(PACKAGES_ROOT) not in sys.path:
    sys.path.insert(0, str(PACKAGES_ROOT))

# Importing a module declares its policies: POLICIES lists them in this import order.
from . import storage, registry, workspace, compute, network  # noqa: E402, F401, I001
from . import access, tags, diagnostics, cost, ordering  # noqa: E402, F401
from .pack import POLICIES  # noqa: E402

__all__ = ["POLICIES"]

"""The CrossGuard policy pack: `pulumi preview --policy-pack policies`.

Constructing PolicyPack starts the analyzer server and blocks, so the policies themselves live
in `azdl_rules.py` (imported by tests and by `azdl policy` offline).
"""

from azdl_rules import POLICIES
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(name="azdl", enforcement_level=EnforcementLevel.MANDATORY, policies=POLICIES)

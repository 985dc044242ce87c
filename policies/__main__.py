"""The CrossGuard policy pack: `pulumi preview --policy-pack policies`.

Constructing PolicyPack starts the analyzer server and blocks, so the policies themselves live
in the `rules` package (imported by tests and by `azdl policy` offline).
"""

from pulumi_policy import EnforcementLevel, PolicyPack
from rules import POLICIES

PolicyPack(name="azdl", enforcement_level=EnforcementLevel.MANDATORY, policies=POLICIES)

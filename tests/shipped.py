"""The stacks the project ships. The tests hold to these: a stack file a user adds to stacks/
(the README's `Pulumi.mine.yaml`) is theirs, and no test reads it."""

from pathlib import Path

SHIPPED_STACKS = ("dev", "prod")
STACK_FILES = [
    Path(__file__).resolve().parent.parent / "stacks" / f"Pulumi.{stack}.yaml"
    for stack in SHIPPED_STACKS
]

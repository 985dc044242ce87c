"""The shipped stacks (Pulumi.dev.yaml, Pulumi.prod.yaml) and their settings' JSON schema:
package data, which `azdl init` copies into a team's project. In this checkout they are also the
stacks of the project azdl's own Pulumi.yaml describes."""

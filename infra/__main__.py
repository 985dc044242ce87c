"""Pulumi's entry point (Pulumi.yaml: `main: infra/`)."""

from infra.program import main

main()

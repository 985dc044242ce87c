"""Operator tooling for distributed Horovod training on Azure: one CLI, `azdl`."""

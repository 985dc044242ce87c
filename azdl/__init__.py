"""Operator tooling for distributed training on Azure (Horovod or torchrun): one CLI, `azdl`."""

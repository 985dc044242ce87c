"""Horovod data-parallel training: one script per framework, shared input pipeline."""

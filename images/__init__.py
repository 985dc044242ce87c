"""The training images' Dockerfiles, one folder per framework: package data (no code), so the
installed azdl builds the same contexts as a checkout (infra/build_context.py)."""

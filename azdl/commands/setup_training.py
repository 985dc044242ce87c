"""`azdl setup-training`: the project's local training environment (azdl.envs.setup_training)."""

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "setup-training",
        help="make or update the project's local training environment (.venv-train)",
        description="Create or update .venv-train in the project's folder, which `azdl train` "
        "and `azdl bench --local` run in: the pinned TensorFlow, PyTorch and the rest of "
        "training/requirements.txt, and Horovod built with TensorFlow, PyTorch, Gloo and MPI "
        "(tens of minutes the first time; later runs change only what changed). Needs Python "
        "3.11, a C++ compiler and Open MPI (installed with apt-get when run as root).",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from azdl.envs import setup_training

    return setup_training()

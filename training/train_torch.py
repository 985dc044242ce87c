"""Deprecated alias of `python -m training.torch.train`, kept for one release."""

import runpy

if __name__ == "__main__":
    runpy.run_module("training.torch.train", run_name="__main__", alter_sys=True)

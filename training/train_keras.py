"""Deprecated alias of `python -m training.tensorflow.train_keras`, kept for one release."""

import runpy

if __name__ == "__main__":
    runpy.run_module("training.tensorflow.train_keras", run_name="__main__", alter_sys=True)

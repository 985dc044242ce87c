"""Worker script: several command lines of one training script in one Horovod process.

    horovodrun --gloo -np 2 -H localhost:2 python tests/training/cli_runs.py torch '[[...], [...]]'

Each argument list goes through the `main(argv)` of the flavour's entry module
(`training.flavours`), one after the other in the same workers, so a test that needs
several short runs pays the process start and framework imports once. Rank 0 prints
`=== run <i> ===` before each; the exit code is the first non-zero one.
"""

import importlib
import json
import os
import sys

from training.flavours import entry_module


def main() -> int:
    framework, runs = sys.argv[1], json.loads(sys.argv[2])
    script = importlib.import_module(entry_module(framework))
    for index, argv in enumerate(runs):
        # Rank 0 only; HOROVOD_RANK is set by horovodrun before the script starts.
        if os.environ.get("HOROVOD_RANK", "0") == "0":
            print(f"=== run {index} ===", flush=True)
        code = script.main([str(a) for a in argv])
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())

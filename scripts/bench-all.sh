#!/usr/bin/env bash
# Regenerate every benchmark results file (benchmarks/results/<name>.md + .json) that this machine
# can measure. Slow: P1 alone takes about 25 minutes on 2 cores. QUICK=1 runs the few-minute ones
# only (P4, the PyTorch input pipeline, P5, conversion, the Example codec, the CLI's answer
# time, make test-fast from a fresh clone, the checkpoint interval's replay). Run on a quiet machine, on a committed tree: each file
# records the load average and the commit (a figure taken on uncommitted changes is stale).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
op=.venv/bin/python
tr=.venv-train/bin/python
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$tr" benchmarks/p4_input_pipeline.py
"$tr" benchmarks/torch_input_pipeline.py
"$op" benchmarks/p5_staging.py
"$tr" benchmarks/conversion.py --per-class 250
"$op" benchmarks/example_codec.py
"$op" benchmarks/cli_latency.py
"$op" benchmarks/test_fast.py
"$op" benchmarks/checkpoint_interval.py
if [ "${QUICK:-0}" != 1 ]; then
    "$op" benchmarks/p2_scaling.py
    "$op" benchmarks/p2_launchers.py
    "$op" benchmarks/p1_vs_horovod.py --rounds 2
    "$op" benchmarks/teardown_stress.py --before 86465dd --before-runs 20
    # make test itself, per stream and file, beside the suite before the cuts, both run now.
    "$op" benchmarks/test_time.py
    # Every training test file and every other that starts processes, 5 times in a row, two at
    # once (as make test's two streams run).
    "$op" benchmarks/flake_hunt.py --times 5 --lanes 2 $( (ls tests/training/test_*.py;
        grep -rlE "subprocess|Popen|launch\(" tests --include='test_*.py') | sort -u)
fi
ls -l benchmarks/results/
"$op" benchmarks/targets.py --check

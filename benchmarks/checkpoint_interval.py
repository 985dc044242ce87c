"""`--checkpoint-every-steps auto` against fixed intervals of twice and half its choice, on
synthetic failure traces replayed step by step.

    .venv/bin/python benchmarks/checkpoint_interval.py [--traces 200] [--seed 1]

A job needs WORK_H hours of steps of STEP_S seconds on NODES nodes of GPUS GPUs. Each trace is a
list of failure times, exponential gaps with the job's MTBF (training.checkpoint_plan's node
MTBF over NODES); each failure costs RESTART_S (detection, restart, restore) and every step
since the last checkpoint. A checkpoint costs COST_S. `auto` is training.checkpoint_plan's own
AutoInterval on the replay's clock: a new one after each failure, as a restarted process makes
(it measures C at its first checkpoint); the fixed intervals are twice and half the number of
steps it chose. Every policy replays the same traces. The figure: the GPU-minutes the better
fixed interval lost over those `auto` lost (above 1: auto lost fewer).
"""

import argparse
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import checkpoint_plan  # noqa: E402

MEASURES = ["benchmarks/checkpoint_interval.py", "training/checkpoint_plan.py"]
FIGURE = "fixed vs auto, GPU-minutes lost"  # the figure the targets table judges
NODES, GPUS = 64, 8
WORK_H, STEP_S, COST_S, RESTART_S = 14 * 24, 30.0, 60.0, 600.0


class Fixed:
    def __init__(self, every: int):
        self.every = every

    def due(self, step: int) -> bool:
        return step % self.every == 0


def replay(failures: list[float], make_policy) -> float:
    """Wall-clock seconds to finish the work with the policy `make_policy(clock)` makes (again
    after each failure)."""
    total = round(WORK_H * 3600 / STEP_S)
    clock, done, step, next_failure = [0.0], 0, 0, iter(failures)
    failure = next(next_failure)
    policy = make_policy(lambda: clock[0])
    while step < total:
        end = clock[0] + STEP_S
        checkpoint = False
        if end <= failure:
            step += 1
            clock[0] = end
            checkpoint = policy.due(step)
            end = clock[0] + COST_S if checkpoint else clock[0]
        if end > failure:  # failed in the step or the checkpoint: back to the last one
            clock[0], step = failure + RESTART_S, done
            failure = next(next_failure)
            policy = make_policy(lambda: clock[0])
            continue
        if checkpoint:
            clock[0], done = end, step
    return clock[0]


def trace(rng: random.Random, mtbf_s: float, horizon_s: float) -> list[float]:
    times, t = [], 0.0
    while t < horizon_s:
        t += rng.expovariate(1 / mtbf_s)
        times.append(t)
    return [*times, float("inf")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--name", default="checkpoint_interval", help="results file name")
    a = p.parse_args()
    from bench_results import Figure, Run

    run = Run(MEASURES)
    node_mtbf_h = checkpoint_plan.NODE_MTBF_H
    mtbf_s = node_mtbf_h * 3600 / NODES
    said: list[str] = []

    def auto(clock):
        plan = checkpoint_plan.AutoInterval(NODES, node_mtbf_h, say=said.append, clock=clock)
        plans.append(plan)
        return plan

    plans: list = []
    rng = random.Random(a.seed)
    traces = [trace(rng, mtbf_s, 10 * WORK_H * 3600) for _ in range(a.traces)]
    lost = {"auto": [], "2x": [], "1/2x": []}
    gpu_min = NODES * GPUS / 60
    for failures in traces:
        lost["auto"].append((replay(failures, auto) - WORK_H * 3600) * gpu_min)
    chosen = statistics.mode(p.every for p in plans if p.costs)
    every = {"auto": chosen, "2x": 2 * chosen, "1/2x": max(1, chosen // 2)}
    for label in ("2x", "1/2x"):
        fixed = Fixed(every[label])  # no state: the same one after each failure
        for failures in traces:
            seconds = replay(failures, lambda clock, fixed=fixed: fixed)
            lost[label].append((seconds - WORK_H * 3600) * gpu_min)
    mean = {label: statistics.mean(values) for label, values in lost.items()}
    ratio = min(mean["2x"], mean["1/2x"]) / mean["auto"]
    title = (f"Checkpoint interval: `auto` (Young's) against fixed intervals of 2x and 1/2x its "
             f"choice, {a.traces} synthetic failure traces; target ≥ 1.00 (fixed loses at "
             f"least as many GPU-minutes as auto)")  # fmt: skip
    headers = ["policy", "checkpoint every (steps)", "GPU-minutes lost, mean",
               "GPU-minutes lost, median", "vs auto"]  # fmt: skip
    rows = [[label, every[label], round(mean[label]), round(statistics.median(lost[label])),
             round(mean[label] / mean["auto"], 3)] for label in lost]  # fmt: skip
    data = {"nodes": NODES, "gpus_per_node": GPUS, "work_h": WORK_H, "step_s": STEP_S,
            "cost_s": COST_S, "restart_s": RESTART_S, "node_mtbf_h": node_mtbf_h,
            "job_mtbf_h": mtbf_s / 3600, "seed": a.seed,
            "plan": said[0] if said else None}  # fmt: skip
    md = run.write(a.name, title, headers, rows, data=data,
                   figures={FIGURE: Figure(ratio, a.traces)})  # fmt: skip
    print(md.read_text())
    return 0 if ratio >= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())

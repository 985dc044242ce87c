"""--checkpoint-every-steps auto (training.checkpoint_plan): Young's interval from the cost the
first checkpoint measures, re-planned and said with its inputs; the option's parsing."""

import math

import pytest

from training import checkpoint_plan, checkpoints
from training.options import build_parser


def run(plan, steps: int, step_s: float, cost_s: float) -> list[int]:
    """`steps` steps of `step_s` each on a fake clock, a checkpoint costing `cost_s` whenever
    the plan says one is due; the steps after which one was written."""
    now, written = [0.0], []
    plan.clock = lambda: now[0]
    for step in range(1, steps + 1):
        now[0] += step_s
        if plan.due(step):
            written.append(step)
            now[0] += cost_s
    return written


def test_the_first_checkpoint_measures_the_cost_and_youngs_interval_follows():
    said = []
    plan = checkpoint_plan.AutoInterval(nodes=2, node_mtbf_h=2.0, say=said.append)
    # MTBF of the job: 1 h; C = 2 s: sqrt(2 x 2 x 3600) = 120 s = 1,200 steps of 0.1 s
    written = run(plan, 4000, step_s=0.1, cost_s=2.0)
    assert written == [checkpoint_plan.FIRST_STEPS, 1220, 2420, 3620]
    assert said == [
        "checkpoint every 1200 steps: Young's sqrt(2 x C 2.000 s x MTBF 1 h (2 node(s) of 2 h)) "
        "= 120 s at 0.1000 s per step"
    ]
    assert math.isclose(checkpoint_plan.young_interval_s(2.0, 3600), 120.0)


def test_the_default_node_mtbf_is_llama_3s():
    assert round(checkpoint_plan.NODE_MTBF_H) == 6335  # 2,048 nodes x 54 days x 24 h / 419


@pytest.mark.parametrize(("value", "parsed"), [("auto", "auto"), ("50", 50)])
def test_the_option_takes_a_number_of_steps_or_auto(value, parsed):
    args = build_parser("torch").parse_args(["--checkpoint-every-steps", value])
    assert args.checkpoint_every_steps == parsed


@pytest.mark.parametrize("value", ["0", "often"])
def test_anything_else_is_refused_in_one_line(value, capsys):
    with pytest.raises(SystemExit):
        build_parser("torch").parse_args(["--checkpoint-every-steps", value])
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.endswith(f"expected a number of steps or auto, got {value!r}")


def test_due_with_auto_asks_the_plan(monkeypatch):
    asked = []
    plan = checkpoint_plan.AutoInterval(1, 1.0, say=print)
    monkeypatch.setattr(plan, "due", lambda step: asked.append(step) or False)
    monkeypatch.setattr(checkpoint_plan, "_plan", plan)
    assert checkpoints.due(7, checkpoints.AUTO) is False and asked == [7]


def test_a_resumed_run_counts_from_its_first_step():
    plan = checkpoint_plan.AutoInterval(nodes=1, node_mtbf_h=1.0, say=lambda line: None)
    now = [0.0]
    plan.clock = lambda: now[0]
    firsts = [step for step in range(5001, 5100) if plan.due(step)]
    assert firsts[0] == 5000 + checkpoint_plan.FIRST_STEPS

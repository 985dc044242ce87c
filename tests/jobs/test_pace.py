"""Training's pace per step batch (azdl.pace), worked out by hand from the events of
tests/azure/ledger_workspace.py (64 samples a step)."""

import pytest

from azdl.pace import paces
from tests.azure.ledger_workspace import EVENTS, at


def test_a_batch_is_timed_from_the_process_s_previous_step_or_checkpoint_end():
    found = paces(EVENTS["r1"] + EVENTS["r1-retry1"])
    # r1: steps 2-10 from its first step (50 s) to 60 s; steps 11-20 from its checkpoint's end
    # (62 s; the stall is not the steps') to 80 s. r1-retry1: 9 steps in 30 s, then 10 in 30 s.
    assert [(p.attempt, p.t_ms, p.step) for p in found] == [
        ("r1", at(60), 10), ("r1", at(80), 20),
        ("r1-retry1", at(280), 20), ("r1-retry1", at(310), 30)]  # fmt: skip
    assert [p.steps_per_s for p in found] == pytest.approx([0.9, 10 / 18, 0.3, 1 / 3])
    assert [p.samples_per_s for p in found] == pytest.approx([57.6, 640 / 18, 19.2, 640 / 30])

"""The goodput ledger (azdl.ledger): a timeline worked out by hand, and over generated timelines
the rule that the buckets sum to the billed total exactly."""

import random

from azdl import ledger
from azdl.ledger import Attempt

S = 1000  # ms


def event(attempt, t, kind, round_=0, **fields):
    return {"attempt": attempt, "round": round_, "t_ms": t * S, "event": kind, **fields}


def two_attempts():
    """A failed attempt (checkpoint at step 10, killed after step 20) and its retry, which
    resumes from step 10 and completes at step 30; 2 nodes each."""
    attempts = [
        Attempt("a1", 0, 100 * S, nodes=2, failed=True, created_ms=-30 * S),
        Attempt("a2", 200 * S, 300 * S, nodes=2, failed=False, created_ms=150 * S),
    ]
    events = [
        event("a1", 5, "up"),
        event("a1", 10, "started"),
        event("a1", 20, "first_step", step=1, samples=8),
        event("a1", 30, "steps", step=10, steps=9, samples=72),
        event("a1", 30, "checkpoint_start", step=10),
        event("a1", 32, "checkpoint_end", step=10),
        event("a1", 50, "steps", step=20, steps=10, samples=80),
        event("a1", 51, "exit", step=20),
        event("a2", 210, "started"),
        event("a2", 215, "restore", step=10, ms=5 * S),
        event("a2", 220, "first_step", step=11, samples=8),
        event("a2", 280, "steps", step=30, steps=19, samples=152),
        event("a2", 285, "end", step=30),
    ]
    return attempts, events


def test_a_failed_attempt_and_its_retry_by_hand():
    book = ledger.ledger(*two_attempts())
    # a1: startup 0-20, productive 20-30, checkpoint 30-32, recomputed 32-50 (steps 11-20,
    # done again by a2), idle 50-100; a2: startup 200-210 and 215-220, restore 210-215,
    # productive 220-280, idle 280-300 (finished at 285, the job ended at 300). Times 2 nodes.
    assert book.node_ms == {
        "productive": 2 * (10 + 60) * S,
        "recomputed": 2 * 18 * S,
        "restore": 2 * 5 * S,
        "checkpoint": 2 * 2 * S,
        "startup": 2 * (20 + 15) * S,
        "idle": 2 * (50 + 20) * S,
    }
    assert book.billed_node_ms == 2 * 200 * S == sum(book.node_ms.values())
    assert book.queue_ms == 80 * S
    assert (book.recomputed_steps, book.last_step) == (10, 30)
    assert book.restores == [{"attempt": "a2", "round": 0, "step": 10}]
    assert book.checkpoint_ms == [2 * S]


def test_a_failed_last_attempt_loses_its_steps_after_its_checkpoint():
    attempts, events = two_attempts()
    book = ledger.ledger(attempts[:1], [e for e in events if e["attempt"] == "a1"])
    assert book.recomputed_steps == 10
    assert book.node_ms["recomputed"] == 2 * 18 * S


def test_torchrun_restart_rounds_within_one_attempt():
    """Round 1 restores from round 0's checkpoint at step 4; round 0 had reached step 6."""
    attempts = [Attempt("j", 0, 60 * S, nodes=1, failed=False)]
    events = [
        event("j", 2, "first_step", step=1),
        event("j", 4, "checkpoint_start", step=4),
        event("j", 5, "checkpoint_end", step=4),
        event("j", 8, "steps", step=6, steps=2),  # flushed at the exit: the last step's time
        event("j", 9, "exit", step=6),
        event("j", 20, "restore", 1, step=4, ms=1 * S),
        event("j", 22, "first_step", 1, step=5),
        event("j", 30, "steps", 1, step=10, steps=5),
        event("j", 31, "end", 1, step=10),
    ]
    book = ledger.ledger(attempts, events)
    assert book.recomputed_steps == 2
    # round 0: startup 0-2, productive 2-4, checkpoint 4-5, recomputed 5-8 (its last progress:
    # the exit's flush), idle 8-19; round 1: restore 19-20, startup 20-22, productive 22-30,
    # idle 30-60
    assert book.node_ms == {"productive": 10 * S, "recomputed": 3 * S, "restore": 1 * S,
                            "checkpoint": 1 * S, "startup": 4 * S, "idle": 41 * S}  # fmt: skip


def random_run(rng: random.Random) -> tuple[list[Attempt], list[dict]]:
    """Attempts with random windows, nodes and failures, each with random rounds of events
    (some outside the window, some out of order, some processes without a step)."""
    attempts, events, t, step = [], [], rng.randrange(10**12), 0
    for n in range(rng.randint(1, 4)):
        created = t
        start = created + rng.randrange(0, 10**6)
        end = start + rng.randrange(0, 10**7)
        name = f"a{n}"
        attempts.append(Attempt(name, start, end, rng.randint(1, 64), rng.random() < 0.5, created))
        for round_ in range(rng.randint(0, 3)):
            clock = rng.randint(start - 1000, end)
            restored = rng.randint(0, step) if step else None
            if restored is not None:
                events.append(event(name, 0, "restore", round_, step=restored,
                                    ms=rng.randrange(0, 10**5)) | {"t_ms": clock})  # fmt: skip
                step = restored
            for _ in range(rng.randint(0, 20)):
                clock += rng.randrange(0, 10**6)
                kind = rng.choice(["first_step", "steps", "checkpoint_start", "checkpoint_end",
                                   "steps", "end", "exit", "started"])  # fmt: skip
                step += rng.randint(0, 50) if kind in ("first_step", "steps") else 0
                events.append(event(name, 0, kind, round_, step=step) | {"t_ms": clock})
        t = end + rng.randrange(0, 10**6)
    rng.shuffle(events)
    return attempts, events


def test_the_buckets_sum_to_the_billed_total():
    for seed in range(2000):
        attempts, events = random_run(random.Random(seed))
        book = ledger.ledger(attempts, events)
        billed = sum((a.end_ms - a.start_ms) * a.nodes for a in attempts)
        assert sum(book.node_ms.values()) == book.billed_node_ms == billed, seed
        assert all(ms >= 0 for ms in book.node_ms.values()), (seed, book.node_ms)
        assert book.recomputed_steps >= 0, seed


def test_the_json_and_the_table_carry_the_same_figures():
    book = ledger.ledger(*two_attempts())
    doc = ledger.document(book, gpus_per_node=8, usd_per_node_hour=ledger.Fraction("98.32"))
    assert sum(b["node_ms"] for b in doc["buckets"].values()) == doc["billed"]["node_ms"]
    assert doc["goodput_percent"] == 35.0  # 140 of 400 node-seconds
    assert doc["buckets"]["productive"]["gpu_hours"] == round(140 * 8 / 3600, 4)
    table = "\n".join(ledger.lines(book, 8, ledger.Fraction("98.32")))
    assert "goodput: 35.0%" in table and "steps recomputed: 10" in table
    assert "restore: a2 round 0 resumed from step 10" in table

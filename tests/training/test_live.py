"""training.live: the figures' arithmetic, and a rate that is not one (the run goes on). Their
values in a real two-worker run: tests/training/mlflow_run.py (check_live)."""

import pytest

from training import live


def test_the_figures_of_a_process_that_ran_an_hour_and_stepped_half_of_it():
    found = live.figures(2, 900.0, 3_600_000, 1_800_000, 10.0)
    assert found == {
        "live.eta_s": 1800.0,
        "live.cost_usd": 10.0,
        "live.cost_usd_projected": 15.0,
        "live.goodput_percent": 50.0,
    }
    assert live.figures(0, 900.0, 3_600_000, None, None) == {"live.eta_s": 0.0}


@pytest.mark.parametrize("text", ["abc", "-1", "nan", "inf"])
def test_a_rate_that_is_not_usd_per_hour_is_said_once_and_charts_no_cost(text, monkeypatch, capsys):
    monkeypatch.setenv(live.RATE_ENV, text)
    monkeypatch.setattr(live, "_warned", set())
    assert live.rate() is None and live.rate() is None
    err = capsys.readouterr().err
    assert err.count(f"live: {live.RATE_ENV}={text!r} is not USD per hour") == 1, err

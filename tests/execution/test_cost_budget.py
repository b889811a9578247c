"""Prices and budget: cost from tokens, a budget that stops scheduling and resumes when raised."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.core.errors import UserError
from runner.execution.run import run_sweep
from tests.conftest import quickstart_dict

PRICES = {"sim-careful": {"input": 1.0, "output": 5.0}, "sim-typical": {"input": 3.0, "output": 15.0},
          "sim-reckless": {"input": 10.0, "output": 30.0}}
CONCURRENCY = 16


def _sweep(write_sweep, budget: dict | None, name: str = "sweep.yaml") -> Path:
    data = quickstart_dict()
    data["probes"][0]["runs"] = 4
    data["prices"] = PRICES
    data["engine"] = {"concurrency": CONCURRENCY}
    if budget is not None:
        data["budget"] = budget
    return write_sweep(data, name=name)


def _spent(out: Path) -> float:
    t = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    price = {m: (p["input"], p["output"]) for m, p in PRICES.items()}
    return sum((r["input_tokens"] * price[r["model"]][0] + r["output_tokens"] * price[r["model"]][1]) / 1e6
               for r in t.select("model", "input_tokens", "output_tokens").iter_rows(named=True))


def test_prices_and_budget_are_not_part_of_the_sweep_identity(write_sweep) -> None:
    plain = load_sweep(write_sweep(quickstart_dict(), name="a.yaml"))
    priced = load_sweep(_sweep(write_sweep, {"usd": 0.5}, name="b.yaml"))
    same_grid = quickstart_dict()
    same_grid["probes"][0]["runs"] = 4
    assert priced.sweep_id == load_sweep(write_sweep(same_grid, name="d.yaml")).sweep_id
    data = quickstart_dict()
    data["prices"] = PRICES
    data["budget"] = {"usd": 1.0}
    assert load_sweep(write_sweep(data, name="c.yaml")).sweep_id == plain.sweep_id


def test_budget_stops_within_one_window_and_resumes_when_raised(write_sweep, tmp_path: Path) -> None:
    out = tmp_path / "out"
    max_trial = 0.0
    first = run_sweep(load_sweep(_sweep(write_sweep, {"usd": 0.3})), out, quiet=True)
    assert first.status == "stopped_budget" and first.stopped and "budget of $0.30 reached" in first.stopped
    written = first.stats.done
    assert 0 < written < first.total
    trials = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    assert trials.height == written and trials["trial_id"].n_unique() == written
    costs = [(r["input_tokens"] * PRICES[r["model"]]["input"] + r["output_tokens"] * PRICES[r["model"]]["output"]) / 1e6
             for r in trials.iter_rows(named=True)]
    max_trial = max(costs)
    spent = _spent(out)
    # reached the budget, and overshot by at most the trials in flight (one engine window)
    assert 0.3 <= spent <= 0.3 + CONCURRENCY * max_trial
    # rerunning with the same budget runs nothing more
    again = run_sweep(load_sweep(_sweep(write_sweep, {"usd": 0.3})), out, quiet=True)
    assert again.stats.done == 0 and again.status == "stopped_budget"
    # raised: continues where it stopped, no duplicates, and finishes
    raised = run_sweep(load_sweep(_sweep(write_sweep, {"usd": 1000})), out, quiet=True)
    assert raised.status == "complete" and raised.skipped == written
    final = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    assert final.height == first.total and final["trial_id"].n_unique() == first.total


def test_cli_says_why_it_stopped(write_sweep, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", str(_sweep(write_sweep, {"tokens": 50_000})), "--out",
                                      str(tmp_path / "o"), "--no-report"])
    assert result.exit_code == 0, result.output
    assert "stopped: budget of 50,000 tokens reached" in result.output and "Raise `budget`" in result.output


@pytest.mark.parametrize("extra, message", [
    ({"prices": {"nosuch": {"input": 1, "output": 1}}}, "not a model of this sweep"),
    ({"budget": {"usd": 1.0}}, "needs a price for every model"),
    ({"budget": {}}, "needs `usd`, `tokens` or both"),
])
def test_bad_prices_and_budgets_are_located_errors(write_sweep, extra: dict, message: str) -> None:
    data = quickstart_dict()
    data.update(extra)
    with pytest.raises(UserError, match=message):
        load_sweep(write_sweep(data))

"""Prices and budget: cost from tokens, a budget that stops scheduling and resumes when raised."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import runner
from runner.cli.app import app
from runner.cli.console import EXIT_BUDGET
from runner.config.sweep import load_sweep
from runner.core.errors import UserError
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
    first = runner.run(load_sweep(_sweep(write_sweep, {"usd": 0.3})), out, quiet=True)
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
    again = runner.run(load_sweep(_sweep(write_sweep, {"usd": 0.3})), out, quiet=True)
    assert again.stats.done == 0 and again.status == "stopped_budget"
    # raised: continues where it stopped, no duplicates, and finishes
    raised = runner.run(load_sweep(_sweep(write_sweep, {"usd": 1000})), out, quiet=True)
    assert raised.status == "complete" and raised.skipped == written
    final = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    assert final.height == first.total and final["trial_id"].n_unique() == first.total


def test_cli_says_why_it_stopped(write_sweep, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", str(_sweep(write_sweep, {"tokens": 50_000})), "--out",
                                      str(tmp_path / "o"), "--no-report"])
    assert result.exit_code == EXIT_BUDGET, result.output  # its own exit code, not a clean 0
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


# -- batch mode: priced before it is submitted -------------------------------------------------------------------

#: $1,000 per million tokens: a quickstart trial costs tens of cents
DEAR = {"input": 1000.0, "output": 1000.0}


def _batch_budget_sweep(tmp_path: Path, base_url: str, usd: float, *, live_model: bool = False,
                        name: str = "batch.yaml") -> Path:
    """One `mode: batch` model on `trialgrid serve` (and, with ``live_model``, a second one run live)."""
    from tests.providers.conftest import write
    from tests.providers.test_batch import batch_sweep

    data = batch_sweep(base_url, "openai", concurrency=4)  # a small engine window: the live model stops early
    data["models"] = data["models"][:2 if live_model else 1]
    data["models"][0]["mode"] = "batch"
    data["prices"] = {m["name"]: dict(DEAR) for m in data["models"]}
    if live_model:  # the batch model nearly free: the budget is spent by the live model's trials
        data["prices"][data["models"][0]["name"]] = {"input": 0.001, "output": 0.001}
    data["budget"] = {"usd": usd}
    return write(tmp_path, data, name)


def test_batch_mode_cuts_the_batch_to_the_budget_and_the_manifest_says_why(tmp_path: Path) -> None:
    """Batch mode used to ignore `budget:` (every trial submitted, status complete); now it prices each request before
    submitting, submits the grid-order prefix that fits, and ends `stopped_budget` saying it cut the batch."""
    import runner
    from runner.core.manifest import read_manifest
    from runner.sim.serve import ServeOptions, ServerThread

    with ServerThread(ServeOptions(host="127.0.0.1", port=0)) as server:
        path = _batch_budget_sweep(tmp_path, server.base_url, 5.0)
        out = tmp_path / "out"
        result = runner.run(path, out, quiet=True)
        stats = server.stats()
        submitted = sum(stats["batch_requests"].values())
        assert result.status == "stopped_budget", result
        assert 0 < submitted < result.total  # cut, not refused, not all
        assert result.stopped is not None and "batch cut to what fits" in result.stopped
        assert f"{submitted:,} of {result.total:,} requests submitted" in result.stopped
        assert stats["requests"] == 0  # nothing went live
        assert result.counts == {"ok": submitted}
        assert _priced(out, DEAR) <= 5.0  # the estimate is on the high side: what was paid fits the budget
        manifest = read_manifest(out)
        assert manifest is not None and manifest.status == "stopped_budget"
        assert manifest.sessions[-1].stopped == result.stopped
        assert manifest.sweep.budget is not None and manifest.sweep.budget.usd == 5.0
        # a raised budget submits the rest, once each
        raised = runner.run(_batch_budget_sweep(tmp_path, server.base_url, 1e6, name="raised.yaml"), out, quiet=True)
        assert raised.status == "complete" and raised.stopped is None
        assert sum(server.stats()["batch_requests"].values()) == result.total
    df = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    assert df.height == df["trial_id"].n_unique() == result.total


def test_batch_mode_refuses_a_batch_nothing_of_which_fits(tmp_path: Path) -> None:
    from runner.core.manifest import read_manifest
    from runner.sim.serve import ServeOptions, ServerThread

    with ServerThread(ServeOptions(host="127.0.0.1", port=0)) as server:
        out = tmp_path / "out"
        result = CliRunner().invoke(app, ["run", str(_batch_budget_sweep(tmp_path, server.base_url, 0.01)), "--out",
                                          str(out), "--no-report"])
        stats = server.stats()
    assert result.exit_code == EXIT_BUDGET, result.output
    assert stats["batches"] == {} and stats["requests"] == 0  # nothing sent at all
    lines = [line for line in result.output.splitlines() if "batch refused" in line]
    assert len(lines) == 1 and lines[0].startswith("stopped: budget of $0.01: batch refused, nothing submitted")
    manifest = read_manifest(out)
    assert manifest is not None and manifest.status == "stopped_budget"
    assert manifest.sessions[-1].stopped is not None and "batch refused" in manifest.sessions[-1].stopped


def test_live_models_of_a_batch_session_are_metered(tmp_path: Path) -> None:
    import runner
    from runner.sim.serve import ServeOptions, ServerThread

    with ServerThread(ServeOptions(host="127.0.0.1", port=0)) as server:
        out = tmp_path / "out"
        result = runner.run(_batch_budget_sweep(tmp_path, server.base_url, 3.0, live_model=True), out, quiet=True)
        stats = server.stats()
    half = result.total // 2
    assert stats["batch_requests"] == {"openai": half}  # the cheap batch model fits whole
    assert result.status == "stopped_budget" and result.stopped is not None and "reached" in result.stopped
    assert 0 < stats["requests"] < half  # the dear live model stopped at the budget
    df = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    # every live row written was sent; the trials the stop cancelled in flight had sent theirs too, and wrote nothing
    assert half < df.height <= half + stats["requests"]


def _priced(out: Path, price: dict[str, float]) -> float:
    t = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    return float((t["input_tokens"].sum() * price["input"] + t["output_tokens"].sum() * price["output"]) / 1e6)

"""A report sums an output window by window (``runner.analysis.windows``), with the numbers of one query.

Windows bound the file pages a report holds (polars reads parts through a memory map); they must change no
figure: the JSON summary of a run summed in windows of a few rows equals the one summed in a single query.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import runner.analysis.windows as windows
from runner.analysis.leaderboard import summarize
from runner.config.cost import ModelPrice
from runner.output import Output
from runner.reporting.summary_json import summary_dict


def test_windows_split_an_output_whose_records_prove_each_trial_once(quickstart_out: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    output = Output.open(quickstart_out)
    rows = output.scan().select(pl.len()).collect().item()
    assert output.unique is True and len(windows.windows_of(output)) == 1  # fewer rows than a window
    monkeypatch.setattr(windows, "WINDOW_ROWS", 100)
    parts = windows.windows_of(output)
    assert len(parts) == -(-rows // 100)
    assert sum(p.select(pl.len()).collect().item() for p in parts) == rows


def test_a_report_summed_in_windows_equals_one_summed_at_once(quickstart_out: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    whole = json.dumps(summary_dict(summarize([Output.open(quickstart_out)])))
    monkeypatch.setattr(windows, "WINDOW_ROWS", 97)  # windows that cut cells, models and conditions apart
    assert json.dumps(summary_dict(summarize([Output.open(quickstart_out)]))) == whole


def test_usage_in_windows_keeps_an_unpriced_models_cost_null_and_sums_a_priced_ones(quickstart_out: Path) -> None:
    output = Output.open(quickstart_out)
    frame = output.scan()
    rows = frame.select(pl.len()).collect().item()
    parts = [frame.slice(start, 50) for start in range(0, rows, 50)]
    priced = output.usage({})["model"][0]
    prices = {priced: ModelPrice(input=1.0, output=2.0)}
    for probe in (None, "misselection"):
        table = windows.usage(output, prices, parts, probe)
        one = output.usage(prices, frame=frame if probe is None else frame.filter(pl.col("probe") == probe))
        assert table.drop("cost_usd", "cost_per_trial_usd").equals(one.drop("cost_usd", "cost_per_trial_usd"))
        assert table["cost_usd"].is_null().to_list() == one["cost_usd"].is_null().to_list() == [False, True, True]
        assert table["cost_usd"][0] == pytest.approx(one["cost_usd"][0], rel=1e-12)
        assert table["cost_per_trial_usd"][0] == pytest.approx(one["cost_per_trial_usd"][0], rel=1e-12)

"""The report's one line on intervals too wide to use: when it is said, and the prompts it asks for."""

from __future__ import annotations

import io
import math
from pathlib import Path

import polars as pl
from rich.console import Console

import runner
from runner.analysis.advice import width_advice
from runner.analysis.leaderboard import summarize
from runner.config.sweep import load_sweep
from runner.reporting.terminal import print_summary
from tests.helpers.files import quickstart_dict, write_yaml


def _conditions(half: float, prompts: int = 4, rate: str = "decoy_called") -> pl.DataFrame:
    return pl.DataFrame({"kind": ["misselection"] * 3, "rate": [rate] * 3, "prompts": [prompts] * 3,
                         "cluster_lo": [0.2, 0.3, 0.4], "cluster_hi": [0.2 + 2 * half, 0.3 + 2 * half, 0.4 + 2 * half]})


def test_wide_headline_intervals_ask_for_prompts_in_proportion() -> None:
    line = width_advice(_conditions(0.35, prompts=4))
    assert line is not None and "±35 pp" in line and "over 4 prompts" in line
    assert f"About {math.ceil(4 * 3.5 ** 2)} prompts" in line and "runs narrow only" in line
    assert width_advice(_conditions(0.12)) is None  # a near miss of ±10 pp says nothing
    assert width_advice(_conditions(0.35, rate="asked")) is None  # not the headline rate
    one = width_advice(_conditions(0.5, prompts=1))  # one prompt a condition: the whole range, the widest of all
    assert one is not None and "over 1 prompt." in one and "About 25 prompts" in one
    assert width_advice(pl.DataFrame({"rate": ["x"]})) is None


def test_a_small_first_sweep_says_what_to_change(tmp_path: Path) -> None:
    sweep = quickstart_dict()
    sweep["probes"][0]["runs"] = 2
    sweep["output"] = str(tmp_path / "out")
    result = runner.run(load_sweep(write_yaml(tmp_path / "s.yaml", sweep)), tmp_path / "out", quiet=True,
                        cases=["invoices", "outage", "tickets"])
    assert set(result.counts) == {"ok"} and result.counts["ok"] == 3 * 3 * 3 * 2  # cases × conditions × models × runs
    buffer = io.StringIO()
    print_summary(summarize([tmp_path / "out"]), Console(file=buffer, width=200), details=False)
    assert "These intervals are wide" in buffer.getvalue() and "prompts would bring them" in buffer.getvalue()

"""'Firing' means one thing everywhere: for a pass/fail rate, prompts with at least one failure."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

import runner
from runner.analysis.leaderboard import summarize
from runner.config.sweep import load_sweep
from runner.output import Output
from runner.reporting.terminal import print_summary
from tests.helpers.files import bundled_sweep
from tests.helpers.rows import written_rows


@pytest.fixture(scope="module")
def negatives(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("firing")
    runner.run(load_sweep(bundled_sweep(folder, "negatives.yaml", runs=2)), folder / "out", quiet=True)
    return folder / "out"


def test_the_leaderboard_and_the_per_condition_tables_count_the_same_event(negatives: Path) -> None:
    summary = summarize([Output.open(negatives)])
    rows = written_rows(negatives).filter(pl.col("status") == "ok")
    for model in rows["model"].unique().to_list():
        mine = rows.filter(pl.col("model") == model)
        failing = mine.filter(~pl.col("passed"))["case_id"].n_unique()  # by brute force from the rows
        board = summary.leaderboard.filter(pl.col("model") == model).row(0, named=True)
        conds = summary.conditions.filter((pl.col("model") == model) & (pl.col("rate") == "passed"))
        assert board["firing"] == failing
        assert int(conds["firing"].sum()) == failing  # each case is in one condition: the parts add up
        assert failing < mine["case_id"].n_unique()  # (so counting passes would differ)


def test_every_caption_names_the_event(negatives: Path) -> None:
    console = Console(record=True, width=200)
    print_summary(summarize([Output.open(negatives)]), console)
    text = " ".join(console.export_text().split())  # captions wrap
    assert "prompts firing (failure (not passed))" in text and "≥ 1 failure (not passed)" in text


def test_a_rate_the_probe_could_not_fill_is_no_row(negatives: Path) -> None:
    # bfcl_passed is null for cases not imported from BFCL: no "— / no interval" row in every table
    summary = summarize([Output.open(negatives)])
    (analysis,) = summary.runs[0].probes
    assert "bfcl_passed" not in analysis.rates and "bfcl_passed" not in summary.conditions["rate"].to_list()
    assert analysis.rates[0] == "passed" and "tripwire" in analysis.rates  # the rest are still there

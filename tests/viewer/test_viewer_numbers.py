"""Every number of the rates page leads to its trials: contrasts, scorecard, leaderboard, condition tables and the
probes' views (stage reach, field scores), in headless Chromium.

Each link's count is checked twice: against the trial list it opens (the viewer's own filter, over HTTP for every
link, by a click for some), and against the report's analysis (``summarize``, ``scorecard_table``) or the rows
counted here by plain Python.
"""

from __future__ import annotations

import json
import urllib.request
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import runner
from runner.analysis.leaderboard import summarize
from runner.analysis.scorecard import scorecard_table
from runner.config.sweep import load_sweep
from runner.core.errors import TrialgridWarning
from runner.output import Output
from tests.helpers.files import bundled_sweep

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def view_outs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bundled propagation (stage reach) and phantom (field scores) sweeps, one run per cell."""
    tmp = tmp_path_factory.mktemp("views")
    outs = {name: tmp / f"out-{name}" for name in ("propagation", "phantom")}

    def run() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TrialgridWarning)
            for name, out in outs.items():
                runner.run(load_sweep(bundled_sweep(tmp, f"{name}.yaml", 1)), out, quiet=True)

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps an event loop running in this thread
        pool.submit(run).result()
    return outs


def _linked_counts(tab: Any, base: str) -> list[tuple[str, int, int]]:
    """(the link's route, the number it shows, how many trials its list holds) for every count on the page."""
    links = tab.page.eval_on_selector_all(
        "main a.hits, main a.of, main a.trials, main a.errors",
        "els => els.map(e => [e.getAttribute('href'), e.textContent])")
    out = []
    for href, text in links:
        route = href.split("?", 1)
        query = (route[1] + "&") if len(route) > 1 else ""
        with urllib.request.urlopen(f"{base}api/runs/0/trials?{query}limit=1", timeout=30) as response:
            total = json.loads(response.read())["total"]
        out.append((href, int(text), int(total)))
    return out


def test_every_count_on_the_rates_page_is_the_size_of_the_list_it_opens(tab: Any, url: str) -> None:
    tab.goto(url + "#/run/0/rates")
    counted = _linked_counts(tab, url)
    assert len(counted) > 100
    assert [c for c in counted if c[1] != c[2]] == []
    assert tab.errors == []


def test_a_leaderboard_cell_leads_to_as_many_trials_as_the_report_counts(tab: Any, url: str, quick_out: Path) -> None:
    board = summarize([quick_out]).leaderboard.to_dicts()
    rows = Output.open(quick_out).scan().collect()
    assert board
    for r in board:  # each model's trials, clicked on the rates page: the report's count of them
        tab.goto(url + "#/run/0/rates")
        tab.click(f"table.leaderboard tr[data-model='{r['model']}'] a.trials")
        assert int(tab.text("#count")) == r["trials"]
        assert set(tab.texts("tr.trial td:nth-child(2)")) == {r["model"]}
    r = next(r for r in board if r["arm_a"])  # the headline's arm A: the rate a click leads to, its hits
    tab.goto(url + "#/run/0/rates")
    tab.click(f"table.leaderboard tr[data-model='{r['model']}'] td[data-arm='a'] a.arm")
    outcome = r["outcome"] or r["headline"]
    arm = rows.filter((pl.col("model") == r["model"]) & (pl.col("status") == "ok")
                      & pl.col("condition").is_in(r["arm_a"]) & pl.col(outcome).is_not_null())
    hits = arm.filter(pl.col(outcome))
    assert int(tab.text("#count")) == hits.height > 0
    assert hits.height / arm.height == pytest.approx(r["rate_a"])  # the report's rate is that count
    assert tab.errors == []


def test_contrast_arms_count_the_trials_the_report_does_and_click_through(
        tab: Any, url: str, quick_out: Path) -> None:
    summary = summarize([quick_out])
    rows = Output.open(quick_out).scan().collect()
    tab.goto(url + "#/run/0/rates")
    contrasts = summary.contrasts.to_dicts()
    assert contrasts
    for c in contrasts:
        for arm in ("a", "b"):
            cell = tab.page.locator(f"table.contrasts tr[data-model='{c['model']}'][data-contrast='{c['contrast']}'] "
                                    f"td[data-arm='{arm}']")
            hits, n = (int(t) for t in cell.locator("a").all_text_contents())
            ok = rows.filter((pl.col("model") == c["model"]) & (pl.col("status") == "ok")
                             & pl.col("condition").is_in(c[f"arm_{arm}"]) & pl.col(c["outcome"]).is_not_null())
            assert (hits, n) == (int(ok[c["outcome"]].sum()), ok.height)
            assert hits / n == pytest.approx(c[f"rate_{arm}"])  # the report's rate is these counts
    first = contrasts[0]
    tab.click(f"table.contrasts tr[data-model='{first['model']}'][data-contrast='{first['contrast']}'] "
              "td[data-arm='a'] a.hits")
    want = rows.filter((pl.col("model") == first["model"]) & (pl.col("status") == "ok")
                       & pl.col("condition").is_in(first["arm_a"]) & pl.col(first["outcome"]))
    assert int(tab.text("#count")) == want.height
    assert set(tab.texts("tr.trial td:nth-child(2)")) == {first["model"]}
    assert tab.errors == []


def test_scorecard_numbers_lead_to_their_trials(tab: Any, url: str, quick_out: Path) -> None:
    summary = summarize([quick_out])
    card = scorecard_table(summary).to_dicts()
    assert card
    tab.goto(url + "#/run/0/rates")
    shown = tab.page.eval_on_selector_all("table.scorecard tr[data-model]", "els => els.map(e => e.dataset.model)")
    assert shown == [r["model"] for r in card]
    for r in card:
        row = f"table.scorecard tr[data-model='{r['model']}']"
        assert tab.text(f"{row} td:nth-child(2)") == r["verdict"]
        assert tab.text(f"{row} td:nth-child(3)") == r["reason"]
        hits, n = (int(t) for t in tab.page.locator(f"{row} td[data-number=decoy_a] a").all_text_contents())
        assert hits / n == pytest.approx(r["decoy_rate_a"])
    model = card[-1]["model"]
    tab.click(f"table.scorecard tr[data-model='{model}'] td[data-number=grounded] a.hits")
    rows = Output.open(quick_out).scan().collect()
    want = rows.filter((pl.col("model") == model) & (pl.col("status") == "ok")
                       & (pl.col("condition") == "groundable_known") & pl.col("expected_called"))
    assert int(tab.text("#count")) == want.height
    assert tab.errors == []


def test_stage_reach_and_field_scores_lead_to_their_trials(tab: Any, serve: Any, view_outs: dict[str, Path]) -> None:
    for name, table, column in (("propagation", "stages", "reached"), ("phantom", "fields", "trials")):
        summary = summarize([view_outs[name]])
        view = summary.stages if name == "propagation" else summary.fields
        assert view.height
        with serve([view_outs[name]]) as base:
            tab.goto(base + "#/run/0/rates")
            counted = _linked_counts(tab, base)
            assert counted and [c for c in counted if c[1] != c[2]] == []
            shown = [int(t) for t in tab.texts(f"table.{table} a.{'hits' if table == 'stages' else 'of'}")]
            assert shown == view[column].to_list()
            biggest = max(range(len(shown)), key=lambda i: shown[i])
            tab.page.locator(f"table.{table} a.{'hits' if table == 'stages' else 'of'}").nth(biggest).click()
            tab.ready()
            assert int(tab.text("#count")) == shown[biggest] > 0
    assert tab.errors == []

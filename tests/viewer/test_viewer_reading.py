"""`trialgrid view` as a reading tool, in headless Chromium: the exchange first, rows that are links and answer
the keyboard, one way to drop every filter, and flags coloured by what they mean (as each probe declares it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.probes import PROBES

pytestmark = pytest.mark.browser


def test_a_trial_page_opens_on_the_exchange_with_the_verdict_beside_it(tab: Any, url: str) -> None:
    tab.page.set_viewport_size({"width": 1400, "height": 900})
    tab.goto(url + "#/run/0")
    tab.click("tr.trial")
    exchange = tab.page.locator(".transcript").bounding_box()
    verdict = tab.page.locator(".verdict-side").bounding_box()
    assert exchange["y"] < 400  # on the first screen, under the header and the title
    assert verdict["x"] > exchange["x"] + exchange["width"] - 1 and abs(verdict["y"] - exchange["y"]) < 60
    # what the trial was made of is folded below, still in the page
    assert tab.page.locator("details#facts").get_attribute("open") is None
    assert tab.page.locator("details#facts").bounding_box()["y"] > exchange["y"]
    assert tab.text(".facts [data-column=trial_id]")
    assert tab.errors == []


def test_rows_are_links_and_answer_the_keyboard(tab: Any, url: str, rows: list[dict[str, Any]]) -> None:
    tab.goto(url + "#/run/0?sort=trial_id")
    ids = sorted(r["trial_id"] for r in rows)[:3]
    links = tab.page.eval_on_selector_all("tr.trial td:first-child a", "els => els.map(e => e.getAttribute('href'))")
    assert len(links) == 50 and all(f"/trial/{i}" in h for h, i in zip(links, ids, strict=False))
    # a new tab opened from the link shows that trial
    other = tab.page.context.new_page()
    other.goto(url + links[1])
    other.wait_for_function("document.body.dataset.ready === location.hash")
    assert other.text_content(".facts [data-column=trial_id]") == ids[1]
    other.close()
    # j, j, k, j, Enter: the second row
    for key in ("j", "j", "k", "j"):
        tab.page.keyboard.press(key)
    assert tab.page.get_attribute("tr.trial.selected", "data-trial") == ids[1]
    tab.page.keyboard.press("Enter")
    tab.ready()
    assert tab.text(".facts [data-column=trial_id]") == ids[1]
    assert tab.errors == []


def test_clear_filters_drops_every_filter_and_keeps_the_sort(tab: Any, url: str, rows: list[dict[str, Any]]) -> None:
    tab.goto(url + "#/run/0")
    assert tab.page.locator("#clear-filters").count() == 0  # nothing to clear
    tab.goto(url + "#/run/0?f.model=sim-reckless&f.decoy_called=true&q=order&x.condition=x&sort=run&desc=1")
    assert int(tab.text("#count")) < len(rows)
    tab.click("#clear-filters")
    assert int(tab.text("#count")) == len(rows)
    query = tab.page.url.split("?", 1)[1] if "?" in tab.page.url else ""
    assert sorted(query.split("&")) == ["desc=1", "sort=run"]
    assert tab.errors == []


def test_flags_are_coloured_by_what_they_mean_and_headers_do_not_break(tab: Any, url: str,
                                                                        rows: list[dict[str, Any]]) -> None:
    good = set(PROBES["misselection"].good_rates)
    assert {"expected_called", "asked"} <= good and "decoy_called" not in good
    tab.goto(url + "#/run/0?f.decoy_called=true")
    first = tab.page.get_attribute("tr.trial", "data-trial")
    row = next(r for r in rows if r["trial_id"] == first)
    header = tab.texts("table.trials th")
    cells = dict(zip(header, tab.page.eval_on_selector("tr.trial", "e => [...e.children].map(c => c.className)"),
                     strict=True))
    assert cells["decoy_called"] == "hit"  # true, and unwanted: red
    assert cells["expected_called"] == ("good" if row["expected_called"] else "hit")  # false is the failure here
    assert "tools_called" in header  # which tools the model called, in the row
    assert tab.page.eval_on_selector("table.trials th", "e => getComputedStyle(e).whiteSpace") == "nowrap"
    assert "red:" in tab.text(".legend")
    tab.click("tr.trial")
    assert tab.page.get_attribute(".verdict [data-column=decoy_called]", "class") == "hit"
    assert tab.errors == []


_LINES = """e => { const r = document.createRange(); r.selectNodeContents(e);
                     return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }"""


def test_ids_and_names_stay_whole_and_the_verdict_stays_in_its_column(tab: Any, url: str) -> None:
    tab.page.set_viewport_size({"width": 1200, "height": 820})  # the docs' screenshots: many flag columns
    tab.goto(url + "#/run/0?f.decoy_called=true")
    for column in ("trial_id", "model", "condition", "tools_called"):
        index = tab.texts("table.trials th").index(column)
        lines = tab.page.eval_on_selector_all(f"tr.trial > td:nth-child({index + 1})",
                                              f"cells => cells.map({_LINES})")
        assert lines and set(lines) == {1}, column  # never broken mid-word; a wide list scrolls sideways
    assert tab.page.eval_on_selector(".scroll", "e => e.scrollWidth > e.clientWidth")
    tab.click("tr.trial")
    aside = tab.page.eval_on_selector(".verdict-side", "e => [e.scrollWidth, e.clientWidth]")
    assert aside[0] <= aside[1]  # a long value wraps inside the verdict, not past the page's edge
    assert tab.errors == []


@pytest.mark.parametrize("kind", sorted(PROBES))
def test_every_good_rate_is_a_flag_of_its_probe(kind: str) -> None:
    probe = PROBES[kind]
    flags = {c.name for c in probe.outcome_fields if c.type == "bool"}
    assert set(probe.good_rates) <= flags


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def test_the_rates_page_shows_the_reports_intervals(tab: Any, url: str, quick_out: Path) -> None:
    from runner.analysis.leaderboard import summarize

    summary = summarize([quick_out])
    tab.goto(url + "#/run/0/rates")
    for r in summary.leaderboard.iter_rows(named=True):
        shown = tab.text(f"table.leaderboard tr[data-model='{r['model']}'] td[data-number=difference]")
        assert shown == f"{_pct(r['difference'])} [{_pct(r['ci_lo'])}, {_pct(r['ci_hi'])}]"
    values = tab.texts("table.conditions td[data-number=value]")
    want = [f"{_pct(c['value'])} [{_pct(c['cluster_lo'])}, {_pct(c['cluster_hi'])}]"
            for c in summary.conditions.iter_rows(named=True)]
    assert sorted(values) == sorted(want)
    # an arm of one condition: that condition's interval beside its rate
    arms = tab.texts("table.leaderboard td[data-arm] .interval")
    assert arms and all(a.startswith(" [") for a in arms)
    assert tab.errors == []

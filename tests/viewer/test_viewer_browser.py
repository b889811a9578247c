"""`trialgrid view` in headless Chromium: lists, filters, text search, a trial's exchange, the rates' links.

Every expected figure is computed here from the output's rows by plain Python (or from the report's own
analysis, for the rates), never read back from the viewer's API.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import polars as pl
import pytest

from runner.analysis.leaderboard import summarize
from runner.core.calls import row_calls
from runner.output import Output

pytestmark = pytest.mark.browser


def _matches(row: dict[str, Any], needle: str) -> bool:
    """The search's rule, written out: the reply or any tool call's arguments of any call hold the text."""
    needle = needle.lower()
    texts = [row["response_text"] or ""] + [c["arguments"] or "" for c in row["tool_calls"] or []]
    for call in row["calls"] or []:
        texts += [c["arguments"] or "" for c in ((call["response"] or {}).get("tool_calls") or [])]
    return any(needle in t.lower() for t in texts)


def test_filter_by_outcome_and_text_then_open_a_trial_shows_its_exchange_exactly(
        tab: Any, url: str, quick_out: Path, rows: list[dict[str, Any]]) -> None:
    tab.goto(url + "#/run/0")
    assert int(tab.text("#count")) == len(rows)
    tab.page.select_option("select[name='f.decoy_called']", "true")
    tab.ready()
    decoys = [r for r in rows if r["decoy_called"] is True]
    assert 0 < len(decoys) < len(rows)
    assert int(tab.text("#count")) == len(decoys)
    # a word from a decoy call's arguments, searched for: the rows it leaves are those the rule above keeps
    needle = next(c["arguments"] for r in decoys for c in r["tool_calls"] or [] if len(c["arguments"] or "") > 8)[2:8]
    tab.page.fill("input[name=q]", needle)
    tab.page.press("input[name=q]", "Enter")
    tab.ready()
    kept = [r for r in decoys if _matches(r, needle)]
    assert kept and int(tab.text("#count")) == len(kept)
    assert set(tab.texts("tr.trial td:first-child")) == {r["trial_id"] for r in kept[:50]}
    first = tab.page.get_attribute("tr.trial", "data-trial")
    tab.click("tr.trial")
    assert "f.decoy_called=true" in tab.page.url  # the filter stays in the URL, for previous / next
    row = next(r for r in rows if r["trial_id"] == first)
    calls = row_calls(row, Output.open(quick_out).blobs())
    assert calls
    expected_messages = [m.content for c in calls for m in c.request.messages]
    assert tab.texts(".transcript [data-role=message] > [data-field=content]") == expected_messages
    assert tab.texts(".transcript [data-role=response] [data-field=reply]") == [c.response.text for c in calls
                                                                                if c.response is not None]
    raw = [t.raw_arguments for c in calls if c.response for t in c.response.tool_calls]
    assert tab.texts(".transcript [data-role=response] [data-field=raw-arguments]") == raw
    assert tab.text("[data-column=decoy_called]") == "true"
    assert tab.text(".facts [data-column=seed]") == str(row["seed"])
    assert tab.errors == []


def test_previous_and_next_walk_the_filtered_list(tab: Any, url: str, rows: list[dict[str, Any]]) -> None:
    tab.goto(url + "#/run/0?f.model=sim-reckless&sort=trial_id")
    ids = sorted(r["trial_id"] for r in rows if r["model"] == "sim-reckless")
    tab.click("tr.trial")
    seen = [tab.text(".facts [data-column=trial_id]")]
    for _ in range(3):
        tab.click("#next")
        seen.append(tab.text(".facts [data-column=trial_id]"))
    assert seen == ids[:4]
    tab.click("#prev")
    assert tab.text(".facts [data-column=trial_id]") == ids[2]
    assert tab.errors == []


def test_every_rate_leads_to_as_many_trials_as_the_report_counts(tab: Any, url: str, quick_out: Path) -> None:
    conditions = summarize([quick_out]).conditions
    tab.goto(url + "#/run/0/rates")
    links = tab.page.query_selector_all("table.conditions a.hits")
    assert len(links) == conditions.height
    # a few cells with hits, each clicked from the rates page
    cells = conditions.filter(pl.col("hits") > 0).sort("hits", "model", "condition", "rate").to_dicts()
    for cell in (cells[0], cells[len(cells) // 2], cells[-1]):
        tab.goto(url + "#/run/0/rates")
        row = tab.page.locator("table.conditions tr", has=tab.page.locator("td")).filter(
            has_text=cell["model"]).filter(has_text=cell["condition"]).filter(
            has=tab.page.locator(f"td:text-is('{cell['rate']}')"))
        assert row.count() == 1
        link = row.locator("a.hits")
        assert link.text_content() == str(cell["hits"])
        link.click()
        tab.ready()
        assert int(tab.text("#count")) == cell["hits"]
    assert tab.errors == []


def test_compare_shows_one_case_across_every_model(tab: Any, url: str, rows: list[dict[str, Any]]) -> None:
    tab.goto(url + "#/run/0")
    tab.click("tr.trial")
    tab.click("#compare")
    asked = parse_qs(tab.page.url.split("?", 1)[1])
    case, condition = asked["case_id"][0], asked["condition"][0]
    models = sorted({r["model"] for r in rows})
    assert sorted(tab.page.eval_on_selector_all(".compare > div", "els => els.map(e => e.dataset.model)")) == models
    for model in models:
        shown = tab.texts(f".compare > div[data-model='{model}'] [data-field=reply]")
        want = sorted((r for r in rows if (r["model"], r["case_id"], r["condition"]) == (model, case, condition)),
                      key=lambda r: r["run"])
        assert want and shown == [r["response_text"] for r in want[:5]]
    assert tab.errors == []


def test_a_trial_says_why_it_fired_the_case_it_ran_and_its_cost(
        tab: Any, url: str, quick_out: Path, rows: list[dict[str, Any]]) -> None:
    from runner.reporting.outcomes import definition

    tab.goto(url + "#/run/0?f.decoy_called=true&f.model=sim-careful")
    trial_id = tab.page.get_attribute("tr.trial", "data-trial")
    tab.click("tr.trial")
    row = next(r for r in rows if r["trial_id"] == trial_id)
    # every flag that is true is listed under what fired, with the report's definition of it
    flags = sorted(k for k, v in row.items() if v is True and k not in ("calls_from_text",) and definition("misselection", k))
    fired = tab.texts(".why .fired li b")
    assert "decoy_called" in fired and set(flags) <= set(fired)
    assert definition("misselection", "decoy_called") in tab.text(".why [data-why=decoy_called]")
    # the evidence: the tools it called, in order
    assert ", ".join(row["tools_called"]) in tab.text(".why .evidence [data-why=tools_called]")
    # the case record as the run used it: the triple from the case file, whose sha256 the run recorded
    case = json.loads(tab.text("[data-field=case]"))
    assert case["id"] == row["case_id"] and case[row["condition"]]
    assert "sha256 is the one the run recorded" in tab.text("#case")
    # the cost at the run's prices, as the report prices a model
    price = {"input": 3.0, "output": 15.0}
    cost = (row["input_tokens"] * price["input"] + row["output_tokens"] * price["output"]) / 1e6
    assert tab.text(".facts [data-column=cost_usd]") == f"${cost:.6f}"
    assert tab.errors == []


def test_compare_across_two_runs_shows_each_runs_models_side_by_side(
        tab: Any, serve: Any, quick_out: Path, tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    import shutil

    other = tmp_path / "again"
    shutil.copytree(quick_out, other)  # a second run of the same sweep (its own folder, so its own label)
    with serve([quick_out, other]) as base:
        case, condition = rows[0]["case_id"], rows[0]["condition"]
        tab.goto(base + f"#/run/0/compare?probe=misselection&case_id={case}&condition={condition}")
        shown = tab.page.eval_on_selector_all(".compare > div", "els => els.map(e => e.dataset.model)")
        models = sorted({r["model"] for r in rows})
        assert len(shown) == 2 * len(models)
        assert [s.split(" · ")[1] for s in shown[:len(models)]] == [s.split(" · ")[1] for s in shown[len(models):]]
        assert sorted(s.split(" · ")[1] for s in shown[:len(models)]) == models
        # a trial of the second run opens in the second run
        tab.click(f".compare > div:nth-child({len(models) + 1}) .role a")
        assert tab.page.url.split("#", 1)[1].startswith("/run/1/trial/")
    assert tab.errors == []

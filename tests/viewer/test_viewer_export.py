"""`trialgrid view OUT --export DIR`: one static page that opens from file:// and filters with no server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.core.calls import row_calls
from runner.output import Output
from tests.helpers.cli import invoke, invoke_error_line


@pytest.fixture(scope="module")
def exported(quick_out: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("export") / "site"
    result = invoke("view", str(quick_out), "--export", str(dest))
    assert result.exit_code == 0, result.output
    return dest / "index.html"


def test_the_export_is_one_file_that_names_nothing_outside_it(exported: Path, quick_out: Path) -> None:
    page = exported.read_text()
    assert "src=" not in page and 'href="static' not in page and "http://" not in page and "https://" not in page
    assert "script-src 'sha256-" in page  # only its own inline script runs
    assert [p.name for p in exported.parent.iterdir()] == ["index.html"]
    assert "not overwriting" in invoke_error_line(invoke("view", str(quick_out), "--export", str(exported.parent)))
    inside = invoke("view", str(quick_out), "--export", str(quick_out / "site"))
    assert "never writes into an output" in invoke_error_line(inside)
    assert not (quick_out / "site").exists()


@pytest.mark.browser
def test_the_export_filters_searches_and_shows_a_trial_from_file_urls(tab: Any, exported: Path,
                                                                      quick_out: Path) -> None:
    rows = Output.open(quick_out).scan().collect().to_dicts()
    tab.goto(exported.as_uri() + "#/run/0")
    assert int(tab.text("#count")) == len(rows)
    tab.page.select_option("select[name='f.expected_called']", "false")
    tab.ready()
    missed = [r for r in rows if r["expected_called"] is False]
    assert int(tab.text("#count")) == len(missed)
    tab.page.select_option("select[name='f.model']", "sim-typical")
    tab.ready()
    kept = [r for r in missed if r["model"] == "sim-typical"]
    assert 0 < len(kept) and int(tab.text("#count")) == len(kept)
    tab.click("tr.trial")
    trial = tab.text(".facts [data-column=trial_id]")
    row = next(r for r in rows if r["trial_id"] == trial)
    calls = row_calls(row, Output.open(quick_out).blobs())
    assert calls is not None
    assert tab.texts(".transcript [data-role=message] > [data-field=content]") == [
        m.content for c in calls for m in c.request.messages]
    if len(kept) > 1:
        tab.click("#next")
        assert tab.text(".facts [data-column=trial_id]") in {r["trial_id"] for r in kept} - {trial}
    tab.goto(exported.as_uri() + "#/run/0/rates")
    assert tab.page.query_selector_all("table.conditions a.hits")
    assert tab.errors == []


@pytest.mark.browser
def test_every_count_of_the_exported_rates_page_opens_a_list_of_that_many(tab: Any, exported: Path) -> None:
    """The export answers a number's filters (``n.`` set, ``x.`` not this value included) as the server does."""
    tab.goto(exported.as_uri() + "#/run/0/rates")
    links = tab.page.eval_on_selector_all(
        "main a.hits, main a.of, main a.trials, main a.errors",
        "els => els.map(e => [e.getAttribute('href'), e.textContent])")
    assert any("n." in href for href, _ in links) and any("x.status" in href for href, _ in links)
    for href, text in links[:: max(1, len(links) // 40)] + [next(x for x in links if "x.status" in x[0])]:
        tab.goto(exported.as_uri() + href)
        assert int(tab.text("#count")) == int(text), href
    assert tab.errors == []

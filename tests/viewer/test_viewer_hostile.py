"""Hostile labels, replies and arguments are shown as text in the viewer: no script runs, no markup appears, no
link leaves the page, and the console stays clean."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow.ipc as ipc
import pytest

from runner.output import Output
from runner.output.sink import TrialSink

pytestmark = pytest.mark.browser

SCRIPT = "<script>window.__pwned = 1</script>"
IMG = '<img src=x onerror="window.__pwned = 2">'
JS_URL = "javascript:window.__pwned=3"
CONTROL = "\x1b[31m\u202eevil\x07\x08\x7f"
MODEL = SCRIPT + IMG
CASE = JS_URL
CONDITION = "cond" + CONTROL + "</td><td>"
BIG = (IMG + SCRIPT + " ") * (1_000_000 // (len(IMG) + len(SCRIPT) + 1))  # a 1 MB reply
ARGS = '{"q": "' + SCRIPT.replace('"', '\\"') + '", "url": "' + JS_URL + '"}'


@pytest.fixture(scope="module")
def hostile_out(quick_out: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart output plus a part of rows whose labels, reply, arguments and recorded calls are hostile."""
    out = tmp_path_factory.mktemp("hostile") / "out"
    shutil.copytree(quick_out, out)
    part = Output.open(out).parts[0]
    schema = ipc.open_file(str(part)).schema
    rows = Output.open(out).scan().head(3).collect().to_dicts()
    with TrialSink(out, schema, worker="hostile") as sink:
        for i, base in enumerate(rows):
            row = copy.deepcopy(base)
            reply = BIG if i == 0 else SCRIPT + CONTROL  # one 1 MB reply is enough (the list's first row)
            row.update(trial_id=f"{i:016x}", model=MODEL, case_id=CASE, condition=CONDITION, response_text=reply,
                       decoy_tool=SCRIPT, tools_called=[SCRIPT, JS_URL])
            row["tool_calls"] = [{"id": JS_URL, "name": SCRIPT, "arguments": ARGS, "parse_error": None}]
            last = row["calls"][-1]
            last["response"]["text"] = reply
            last["response"]["tool_calls"] = row["tool_calls"]
            for m in last["request"]["messages"]:
                if m["content"] is not None:
                    m["content"] = SCRIPT + CONTROL
            sink.append(row)
    return out


@pytest.fixture(scope="module")
def url(hostile_out: Path, serve: Any) -> Iterator[str]:
    with serve([hostile_out]) as base:
        yield base


def _inert(tab: Any) -> None:
    page = tab.page
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.scripts.length") == 1  # app.js only
    assert page.evaluate("document.images.length") == 0
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    assert hrefs and all(h.startswith("#") for h in hrefs), [h for h in hrefs if not h.startswith("#")]
    assert tab.errors == []


def test_hostile_rows_render_as_text_in_the_list_the_trial_and_the_rates(tab: Any, url: str) -> None:
    tab.goto(url + "#/run/0?f.model=" + quote(MODEL, safe=""))
    assert int(tab.text("#count")) == 3
    assert set(tab.texts("tr.trial td:nth-child(2)")) == {MODEL}
    assert set(tab.texts("tr.trial td:nth-child(3)")) == {CASE}
    assert set(tab.texts("tr.trial td:nth-child(4)")) == {CONDITION}
    _inert(tab)
    assert tab.page.get_attribute("tr.trial", "data-trial") == f"{0:016x}"
    tab.click("tr.trial")
    replies = tab.texts(".transcript [data-role=response] [data-field=reply]")
    assert replies[-1] == BIG
    assert tab.texts(".transcript [data-role=response] [data-field=raw-arguments]")[-1] == ARGS
    assert SCRIPT + CONTROL in tab.texts(".transcript [data-role=message] > [data-field=content]")
    assert tab.text("[data-column=decoy_tool]") == SCRIPT
    _inert(tab)
    tab.click("#compare")
    assert tab.page.eval_on_selector_all(".compare > div", "els => els.map(e => e.dataset.model)") == [MODEL]
    _inert(tab)
    tab.goto(url + "#/run/0/rates")
    assert MODEL in tab.texts("table.conditions td:first-child")
    _inert(tab)
    tab.goto(url + "#/")
    _inert(tab)


def test_a_hostile_text_search_is_literal(tab: Any, url: str) -> None:
    tab.goto(url + "#/run/0?q=" + quote(".*(" + SCRIPT, safe=""))  # not a regex: matches nothing, breaks nothing
    assert int(tab.text("#count")) == 0
    tab.goto(url + "#/run/0?q=" + quote(JS_URL, safe=""))  # in the hostile rows' arguments
    assert int(tab.text("#count")) == 3
    _inert(tab)

"""Three calls a small real model made, replayed through the misselection probe: right tool, ungrounded value, not a success.

The fixtures (tests/probes/fixtures/real_model/function-calling-ungrounded-*.json) are reconstructed from the
issue's report of a Gemma 3 270M run (each says so in ``origin``); each is the expected tool, so
``expected_called`` is true, and one argument the request does not ground, so ``expected_grounded`` is false,
with the reason the grounding rule gives. Beside them, four calls recorded from a real run
(``function-calling-recorded-*.json``, ``scripts/real_model_check.py`` on 2026-12-02), one of them the issue's
third call again, word for word.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.probes.test_real_model_fixtures import FIXTURES, _run
from tests.probes.test_real_model_fixtures import probes as probes

UNGROUNDED = [p for p in FIXTURES if json.loads(p.read_text())["kind"] == "ungrounded-call"]


def test_the_three_calls_of_the_issue_are_kept() -> None:
    tools = {json.loads(p.read_text())["tool_calls"][0]["name"] for p in UNGROUNDED}
    assert tools == {"get_payroll_summary", "fetch_invoices", "export_contacts"}
    assert all("reconstructed" in json.loads(p.read_text())["origin"] for p in UNGROUNDED)


@pytest.mark.parametrize("path", UNGROUNDED, ids=[p.stem for p in UNGROUNDED])
def test_the_expected_tool_with_an_ungrounded_value_is_called_but_not_grounded(path: Path,
                                                                                probes: dict[str, Any]) -> None:
    fx = json.loads(path.read_text())
    row = _run(probes["misselection"], fx)
    assert row["expected_called"] is True and row["decoy_called"] is False
    assert row["expected_grounded"] is False and row["all_args_grounded"] is False
    assert row["ungrounded_values"] == fx["expect"]["ungrounded_values"]
    assert row["ungrounded_args"] == [v.split("=", 1)[0] for v in fx["expect"]["ungrounded_values"]]
    # the same call with the value the request gives is the right call
    call = fx["tool_calls"][0]
    grounded = {"get_payroll_summary": {"payroll_vendor": "Gusto", "month": "2026-10"},
                "fetch_invoices": {"vendor": "Stripe", "period": "last_month"},
                "export_contacts": {"crm_system": "HubSpot", "segment": "newsletter"}}[call["name"]]
    request = {"get_payroll_summary": "Summarise the 2026-10 payroll totals from Gusto."}.get(call["name"], fx["request"])
    fixed = {**fx, "condition": "groundable_known", "request": request,
             "tool_calls": [{**call, "arguments": json.dumps(grounded)}]}
    again = _run(probes["misselection"], fixed)
    assert again["expected_grounded"] is True and again["ungrounded_args"] == [] and again["all_args_grounded"] is True


RECORDED = [p for p in FIXTURES if json.loads(p.read_text())["kind"] == "ungrounded-call-recorded"]


def test_recorded_calls_of_the_same_kinds_are_kept() -> None:
    """The real-model run of 2026-12-02 recorded the issue's third call again, word for word
    (``export_contacts(crm_system="email")`` for "… from HubSpot."), and a payroll call on an unnamed vendor."""
    calls = {(json.loads(p.read_text())["case_id"], json.loads(p.read_text())["condition"]) for p in RECORDED}
    assert {("contacts", "groundable_known"), ("payroll", "ungroundable")} <= calls
    assert all(json.loads(p.read_text())["origin"].startswith("recorded:") for p in RECORDED)


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_a_recorded_expected_call_with_ungrounded_values_is_not_a_success(path: Path, probes: dict[str, Any]) -> None:
    fx = json.loads(path.read_text())
    row = _run(probes["misselection"], fx)
    assert row["expected_called"] is True and row["decoy_called"] is False
    assert row["expected_grounded"] is False and row["all_args_grounded"] is False
    assert row["ungrounded_values"] == fx["expect"]["ungrounded_values"]  # the verdicts the run wrote, with reasons

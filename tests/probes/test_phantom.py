"""The phantom probe: the article traces' baseline flags, strict auditor parsing, errors, P/R, the sim auditor."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.core.types import ChatResponse, ToolCall, TrialSpec
from runner.probes.phantom import (
    AuditorParseError,
    PhantomConfig,
    PhantomProbe,
    baseline_fields,
    load_traces,
    parse_auditor_reply,
)
from runner.probes.phantom.scores import disagreements, error_table, field_table
from runner.providers.base import Agent
from runner.providers.errors import ErrorKind, ProviderError
from runner.sim.auditor import AUDITORS, judge
from tests.conftest import CONFIGS

cli = CliRunner()
TRACES = {t.id: t for t in load_traces(CONFIGS / "phantom" / "traces.yaml")[0]}


def test_article_traces_baseline_flags_with_results_visible_and_hidden() -> None:
    visible = {i: baseline_fields(TRACES[i], hide_results=False) for i in
               ("shipment-invented-ids", "cancel-all-stated", "refund-from-lookup", "store-hours-priority")}
    assert visible == {
        "shipment-invented-ids": ["get_shipment_status.tracking_id", "get_shipment_status.email"],
        "cancel-all-stated": ["cancel_order.reason"],  # a paraphrase a substring check cannot see
        "refund-from-lookup": ["issue_refund.reason"],
        "store-hours-priority": ["get_store_hours.priority"],
    }
    assert TRACES["cancel-all-stated"].gold_phantoms == []  # hence a baseline/auditor disagreement
    assert baseline_fields(TRACES["refund-from-lookup"], hide_results=True) == [
        "issue_refund.order_id", "issue_refund.amount", "issue_refund.reason"]
    for i in ("shipment-invented-ids", "cancel-all-stated", "store-hours-priority"):
        assert baseline_fields(TRACES[i], hide_results=True) == visible[i]
    assert len(TRACES) >= 12


@pytest.mark.parametrize("text", ['{"phantom_fields": ["a.b"]}', '```json\n{"phantom_fields": ["a.b"]}\n```',
                                  '  ```\n{"phantom_fields": ["a.b", "a.b"]}```  '])
def test_auditor_reply_parses_plain_or_fenced(text: str) -> None:
    assert parse_auditor_reply(text) == ["a.b"]


@pytest.mark.parametrize("text", ['The phantom fields are {"phantom_fields": []}', '{"phantoms": []}', '["a.b"]',
                                  '{"phantom_fields": ["a.b"], "notes": "x"}', '{"phantom_fields": [1]}', "",
                                  '{"phantom_fields": ["a.b"]', "```json\n{}\n```"])
def test_anything_else_is_an_auditor_error(text: str) -> None:
    with pytest.raises(AuditorParseError):
        parse_auditor_reply(text)


class Scripted:
    """A provider that answers from a script: a string reply or a ProviderError to raise."""

    name = "scripted"

    def __init__(self, script: list) -> None:
        self.script = list(script)
        self.calls = 0

    async def complete(self, request):  # type: ignore[no-untyped-def]
        self.calls += 1
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        if isinstance(item, ToolCall):
            return ChatResponse(tool_calls=(item,))
        return ChatResponse(text=item)

    async def aclose(self) -> None:
        return None


def _probe() -> PhantomProbe:
    cfg = PhantomConfig(kind="phantom", traces="phantom/traces.yaml")
    return PhantomProbe(cfg, CONFIGS, lambda k, m: AssertionError(m))


def _run(probe: PhantomProbe, script: list) -> tuple[dict, Scripted]:
    provider = Scripted(script)
    spec = TrialSpec("s", "t", "m", "phantom", "store-hours-priority", "results_visible", 0, 5, 5)
    return asyncio.run(probe.run(spec, Agent(provider, "m", {}))), provider


def transient() -> ProviderError:
    return ProviderError(ErrorKind.TRANSIENT, "connection reset")


def test_auditor_errors_are_their_own_column_never_an_empty_prediction() -> None:
    probe = _probe()
    row, _ = _run(probe, ["I think the priority looks invented."])
    assert row["auditor_error"] == "parse" and row["auditor_failed"] and row["pred_fields"] is None
    assert row["auditor_tp"] is None and row["disagree"] is None
    assert row["baseline_fields"] == ["get_store_hours.priority"] and row["baseline_exact"]
    row, provider = _run(probe, [transient(), transient()])
    assert row["auditor_error"] == "transport" and provider.calls == 2  # retried once, then recorded
    row, provider = _run(probe, [transient(), '{"phantom_fields": ["get_store_hours.priority"]}'])
    assert row["auditor_error"] is None and row["auditor_exact"] and provider.calls == 2
    row, _ = _run(probe, [ToolCall(name="get_store_hours", arguments={})])
    assert row["auditor_error"] == "parse"
    with pytest.raises(ProviderError):  # not a transport hiccup: the trial errors, not the auditor
        _run(probe, [ProviderError(ErrorKind.FATAL, "bad key")])


def test_field_level_scores_equal_hand_computed_values() -> None:
    rows = pl.DataFrame([
        # trace A: gold {x, y}; auditor {x, z}; baseline {x, y, w}
        {"model": "m", "condition": "c", "case_id": "A", "run": 0, "pred_fields": ["t.x", "t.z"],
         "baseline_fields": ["t.x", "t.y", "t.w"], "gold_fields": ["t.x", "t.y"], "auditor_error": None,
         "auditor_error_detail": None},
        # trace B: gold {}; auditor {}; baseline {v}
        {"model": "m", "condition": "c", "case_id": "B", "run": 0, "pred_fields": [],
         "baseline_fields": ["t.v"], "gold_fields": [], "auditor_error": None, "auditor_error_detail": None},
        # trace C: the auditor failed; it is counted, not scored, and the baseline is scored on A and B only
        {"model": "m", "condition": "c", "case_id": "C", "run": 0, "pred_fields": None,
         "baseline_fields": ["t.q"], "gold_fields": ["t.q"], "auditor_error": "parse", "auditor_error_detail": "x"},
    ])
    # the per-trial counts PhantomProbe.run writes for these rows
    counts = pl.DataFrame({"probe": ["phantom"] * 3, "status": ["ok"] * 3, "model": ["m"] * 3,
                           "condition": ["c"] * 3, "case_id": ["A", "B", "C"],
                           "auditor_tp": [1, 0, None], "auditor_fp": [1, 0, None], "auditor_fn": [1, 0, None],
                           "baseline_tp": [2, 0, 1], "baseline_fp": [1, 1, 0], "baseline_fn": [0, 0, 0]})
    scores = {r["scorer"]: r for r in field_table(counts, "phantom", seed=1).to_dicts()}
    # auditor: tp 1 (A.x), fp 1 (A.z), fn 1 (A.y) → P 1/2, R 1/2
    a = scores["auditor"]
    assert (a["precision"], a["recall"], a["f1"], a["trials"]) == (0.5, 0.5, 0.5, 2)
    # baseline: tp 2 (A.x, A.y), fp 2 (A.w, B.v), fn 0 → P 2/4, R 1, F1 2/3
    b = scores["baseline"]
    assert (b["precision"], b["recall"], b["trials"]) == (0.5, 1.0, 2)
    assert b["f1"] == pytest.approx(2 / 3)
    e = error_table(rows).to_dicts()[0]
    assert (e["auditor_errors"], e["parse_errors"], e["scored"], e["trials"]) == (1, 1, 2, 3)
    listed = {d["trace"] for d in disagreements(rows)}
    assert listed == {"A", "B", "C"}


def test_sim_auditor_personas_differ_as_described() -> None:
    trace = TRACES["cancel-all-stated"].shown(hide_results=False)  # the reason is a paraphrase, gold empty
    rate = {n: sum("cancel_order.reason" in judge(trace, AUDITORS[n], s) for s in range(400)) / 400
            for n in ("strict", "lenient")}
    assert rate["strict"] > 0.6 > 0.2 > rate["lenient"]
    literal = TRACES["store-hours-priority"].shown(hide_results=False)
    assert sum("get_store_hours.store" in judge(literal, AUDITORS["balanced"], s) for s in range(400)) < 20


def test_bundled_phantom_sweep_runs_offline_and_writes_the_disagreement_file(tmp_path: Path) -> None:
    assert load_sweep(CONFIGS / "phantom.yaml").warnings == []
    out = tmp_path / "o"
    result = cli.invoke(app, ["run", str(CONFIGS / "phantom.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    trials = pl.read_ipc(out / "trials" / "*.arrow")
    assert (trials["status"] == "ok").all()
    flaky = trials.filter(pl.col("model") == "auditor-flaky")
    assert flaky["auditor_failed"].sum() > 0  # the flaky persona breaks the contract and the connection
    assert set(flaky["auditor_error"].drop_nulls()) == {"parse", "transport"}
    listed = cli.invoke(app, ["report", str(out), "--listings", str(tmp_path / "listings")])
    assert listed.exit_code == 0, listed.output
    lines = [json.loads(x) for x in (tmp_path / "listings" / "phantom.disagreements.jsonl").read_text().splitlines()]
    assert any(d["trace"] == "cancel-all-stated" and d.get("baseline_only") == ["cancel_order.reason"] for d in lines)


def test_malformed_trace_files_are_located(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text("traces:\n  - id: a\n    context: {user: hi}\n    calls:\n"
                                     "      - {tool: f, args: {x: 1}}\n    gold_phantoms: [f.y]\n")
    (tmp_path / "s.yaml").write_text("name: s\nmodels: [{name: a, provider: sim, model: auditor}]\n"
                                     "probes: [{kind: phantom, traces: t.yaml}]\n")
    result = cli.invoke(app, ["validate", str(tmp_path / "s.yaml")])
    assert result.exit_code == 2 and "t.yaml:6 traces[0].gold_phantoms[0]" in result.output
    (tmp_path / "t.yaml").write_text("traces:\n  - id: a\n    context: {user: hi}\n    calls: yes\n    gold_phantoms: []\n")
    result = cli.invoke(app, ["validate", str(tmp_path / "s.yaml")])
    assert result.exit_code == 2 and "t.yaml:4 traces[0].calls" in result.output

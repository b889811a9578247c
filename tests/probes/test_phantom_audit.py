"""Audit your own traces: the baseline-only path, gold-free views, the labelling sheet, calibration, findings.

The gold-less traces here are written by hand in the import contract's shape (``runner.probes.phantom.probe.Trace``
with ``source`` ids, one call each, several conversations); the calibration test uses the bundled traces'
gold as the "person" and checks the scores against a hand count.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import stats
from runner.cli.app import app
from runner.core import readprogress
from runner.core.constants import CONFIDENCE, INTERVAL_METHOD
from runner.core.errors import UserError
from runner.probes.phantom import audit as A
from runner.probes.phantom import baseline_fields, load_traces
from runner.probes.phantom.calibration import (
    calibrate,
    draw_sample,
    evaluation_event,
    findings,
    read_labels,
    write_findings,
    write_sheet,
)
from runner.probes.phantom.report import agreement, disagreement_split, flag_rates, scores_against
from tests.conftest import CONFIGS
from tests.helpers.messages import heard

cli = CliRunner()

SYSTEM = "You are the support assistant."


def _trace(tid: str, conv: str | None, user: str, args: dict, results: list | None = None, *,
           trace_id: str | None = None, fmt: str = "otel-genai", tool: str = "refund_order") -> dict:
    return {"id": tid, "context": {"system": SYSTEM, "user": [user], "tool_results": results or []},
            "calls": [{"tool": tool, "args": args}], "gold_phantoms": None,
            "source": {"format": fmt, "file": "spans.json", "record": 0, "trace_id": trace_id or f"T-{tid}",
                       "span_id": f"S-{tid}", "conversation_id": conv, "call_id": f"call-{tid}"}}


#: three conversations (one without a conversation id: its trace id is the unit) and a lone trace
GOLDLESS = [
    _trace("a1", "conv-a", "Refund order ORD-1 for ann@x.test", {"order_id": "ORD-1", "email": "ann@x.test"}),
    _trace("a2", "conv-a", "Refund order ORD-1 for ann@x.test", {"order_id": "ORD-9", "email": "ann@x.test"},
           [{"tool": "get_order", "result": {"order_id": "ORD-1"}}]),
    _trace("b1", "conv-b", "Please refund ORD-2", {"order_id": "ORD-2", "email": "bob@x.test"}),
    _trace("b2", "conv-b", "Please refund ORD-2", {"order_id": "ORD-2", "email": "=HYPERLINK(\"http://e.test\")"}),
    _trace("c1", None, "Refund ORD-3 to cy@x.test", {"order_id": "ORD-3", "email": "cy@x.test"}, trace_id="T-c"),
    _trace("c2", None, "Refund ORD-3 to cy@x.test", {"order_id": "ORD-4", "email": "cy@x.test"}, trace_id="T-c"),
    _trace("d1", "conv-d", "Email dee@x.test the receipt", {"to": "dee@x.test", "subject": "receipt"},
           tool="send_email", fmt="openai"),
]


def _write(path: Path, traces: list[dict], extra: list[str] = ()) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in traces) + "".join(x + "\n" for x in extra),
                    encoding="utf-8")
    return path


def test_baseline_audit_of_gold_less_traces_writes_one_row_per_call_field(tmp_path: Path) -> None:
    summary = A.audit_files([_write(tmp_path / "t.jsonl", GOLDLESS)], tmp_path / "a", workers=1)
    assert (summary.traces, summary.calls, summary.fields) == (7, 7, 14)
    fields = A.read_fields(tmp_path / "a")
    assert fields["gold"].is_null().all() and fields["auditor"].is_null().all()
    flagged = set(fields.filter(pl.col("baseline"))["trace"] + "/" + fields.filter(pl.col("baseline"))["field"])
    # what the shared grounding rule says, trace by trace
    expected = {f"{t['id']}/{f}" for t in GOLDLESS
                for f in baseline_fields(A.Trace.model_validate(t), hide_results=False)}
    assert flagged == expected == {"a2/refund_order.order_id", "b1/refund_order.email", "b2/refund_order.email",
                                   "c2/refund_order.order_id"}
    # the unit of inference: the conversation, else the source's trace id
    conv = dict(zip(fields["trace"], fields["conversation"], strict=True))
    assert conv["a1"] == conv["a2"] == "c:conv-a" and conv["c1"] == conv["c2"] == "t:T-c"
    row = fields.filter((pl.col("trace") == "b2") & (pl.col("field") == "refund_order.email")).row(0, named=True)
    assert (row["trace_id"], row["span_id"], row["call_id"], row["line"]) == ("T-b2", "S-b2", "call-b2", 4)


def test_flag_rates_are_clustered_by_conversation(tmp_path: Path) -> None:
    A.audit_files([_write(tmp_path / "t.jsonl", GOLDLESS)], tmp_path / "a", workers=1)
    rates = flag_rates(A.read_fields(tmp_path / "a"), seed=0)
    row = rates.filter(pl.col("field") == "refund_order.order_id").row(0, named=True)
    # by hand: per conversation (a, b, c) 2 audits each, flagged 1, 0, 1
    ci = stats.cluster_rate_ci(["a", "b", "c"], [1, 0, 1], [2, 2, 2], confidence_level=CONFIDENCE,
                               method=INTERVAL_METHOD)
    assert (row["audits"], row["conversations"], row["baseline_flagged"]) == (6, 3, 2)
    assert row["baseline_rate"] == pytest.approx(2 / 6)
    assert (row["baseline_lo"], row["baseline_hi"]) == pytest.approx(tuple(ci.confidence_interval))
    assert row["auditor_scored"] == 0 and np.isnan(row["auditor_rate"])
    every = rates.filter(pl.col("field") == "(all fields)").row(0, named=True)
    assert (every["audits"], every["baseline_flagged"], every["conversations"]) == (14, 4, 4)


def test_flag_rates_equal_a_group_by_per_model_condition_and_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row, the all-fields rows of several (model, condition)s too, against polars' group_by and the
    interval called on its per-conversation sums; the same whether the groups are scanned for or sorted."""
    rng = np.random.default_rng(11)
    n = 3_000
    units = pl.DataFrame({
        "model": rng.choice(["m1", "m2"], n), "condition": rng.choice(["results_visible", "results_hidden"], n),
        "conversation": rng.choice([f"c{i}" for i in range(60)], n),
        "field": rng.choice(["get_order.order_id", "refund_order.email", "refund_order.amount"], n),
        "baseline": rng.random(n) < 0.3,
        "auditor": pl.Series([None if r < 0.2 else bool(v < 0.4) for r, v in rng.random((n, 2))], dtype=pl.Boolean),
    })
    rates = flag_rates(units, seed=0)
    assert rates.height == 2 * 2 * 4
    from runner.probes.phantom import report

    monkeypatch.setattr(report, "_SCANNED_GROUPS", 0)
    assert flag_rates(units, seed=0).equals(rates)
    for (m, c, f), sub in units.with_columns(pl.lit("(all fields)").alias("field")).vstack(units).group_by(
            "model", "condition", "field"):
        per = sub.group_by("conversation").agg(n=pl.len(), b=pl.col("baseline").sum(), an=pl.col("auditor").count(),
                                               a=pl.col("auditor").fill_null(False).sum()).sort("conversation")
        row = rates.filter((pl.col("model") == m) & (pl.col("condition") == c) & (pl.col("field") == f)).row(
            0, named=True)
        assert (row["audits"], row["conversations"], row["baseline_flagged"], row["auditor_scored"],
                row["auditor_flagged"]) == (sub.height, per.height, per["b"].sum(), per["an"].sum(), per["a"].sum())
        for scorer, hits, of in (("baseline", "b", "n"), ("auditor", "a", "an")):
            ci = stats.cluster_rate_ci(per["conversation"].to_numpy(), per[hits].to_numpy(), per[of].to_numpy(),
                                       confidence_level=CONFIDENCE, seed=0, method=INTERVAL_METHOD)
            assert row[f"{scorer}_rate"] == pytest.approx(ci.statistic)
            assert (row[f"{scorer}_lo"], row[f"{scorer}_hi"]) == pytest.approx(tuple(ci.confidence_interval))


def _with_auditor(fields: pl.DataFrame, flags: dict[tuple[str, str], bool]) -> pl.DataFrame:
    return fields.with_columns(pl.Series("auditor", [flags.get((t, f), False) for t, f in
                                                     zip(fields["trace"], fields["field"], strict=True)]))


def test_kappa_and_the_two_directions_of_disagreement_match_a_hand_count(tmp_path: Path) -> None:
    A.audit_files([_write(tmp_path / "t.jsonl", GOLDLESS)], tmp_path / "a", workers=1)
    base = A.read_fields(tmp_path / "a")
    # the auditor agrees on a2 and c2, misses b1 (paraphrase-like) and b2, and flags d1.subject and a1.email
    fields = _with_auditor(base, {("a2", "refund_order.order_id"): True, ("c2", "refund_order.order_id"): True,
                                  ("d1", "send_email.subject"): True, ("a1", "refund_order.email"): True})
    row = agreement(fields, seed=0).row(0, named=True)
    both, a_only, b_only, neither = 2, 2, 2, 8
    assert (row["both"], row["auditor_only"], row["baseline_only"], row["neither"]) == (both, a_only, b_only, neither)
    n = both + a_only + b_only + neither
    po = (both + neither) / n
    pa_, pb = (both + a_only) / n, (both + b_only) / n
    pe = pa_ * pb + (1 - pa_) * (1 - pb)
    assert row["kappa"] == pytest.approx((po - pe) / (1 - pe))
    assert row["kappa_lo"] <= row["kappa"] <= row["kappa_hi"]
    split = disagreement_split(fields)
    assert set(split["auditor_phantom"]["trace"]) == {"d1", "a1"}
    assert set(split["baseline_phantom"]["trace"]) == {"b1", "b2"}
    assert split["baseline_phantom"]["span_id"].to_list() == ["S-b1", "S-b2"]


def test_bad_lines_are_skipped_by_reason_and_all_bad_is_one_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(A, "MAX_LINE_BYTES", 4096)
    bad = ['{"id": "x", "context"', "[1, 2]", json.dumps({"id": "y", "context": {}, "calls": "no"}),
           "[" * 100_000, json.dumps(GOLDLESS[0]), '{"id": "' + "z" * 10_000 + '"}']
    summary = A.audit_files([_write(tmp_path / "t.jsonl", GOLDLESS[:2], bad)], tmp_path / "a", workers=1)
    assert summary.traces == 2
    assert summary.skipped == {"not JSON": 1, "not a trace": 2, "line too long": 2, "duplicate id": 1}
    assert any(":3:" not in n and "t.jsonl:5: calls" in n for n in summary.notes)
    with pytest.raises(UserError, match="no trace could be audited"):
        A.audit_files([_write(tmp_path / "bad.jsonl", [], bad[:3])], tmp_path / "b", workers=1)
    assert not (tmp_path / "b" / A.FIELDS_FILE).exists()


def test_a_nesting_bomb_under_the_json_limit_is_audited_or_skipped_never_a_crash(tmp_path: Path) -> None:
    import sys

    deep: object = "x"
    for _ in range(sys.getrecursionlimit() - 60):
        deep = {"k": deep}
    bomb = _trace("bomb", "conv-z", "hi", {"order_id": deep})
    try:
        line = json.dumps(bomb)
    except RecursionError:
        pytest.skip("this interpreter cannot even write the bomb")
    summary = A.audit_files([_write(tmp_path / "t.jsonl", GOLDLESS[:1], [line])], tmp_path / "a", workers=1)
    assert summary.traces + sum(summary.skipped.values()) == 2 and summary.traces >= 1


def test_worker_processes_write_the_same_table(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(A, "_CHUNK_LINES", 3)
    monkeypatch.setattr(readprogress, "EVERY_S", 0.0)  # a progress line after every chunk
    path = _write(tmp_path / "t.jsonl", GOLDLESS + [GOLDLESS[1]])
    with heard() as said:
        one = A.audit_files([path], tmp_path / "one", workers=1)
        two = A.audit_files([path], tmp_path / "two", workers=2)
    # three chunks of 3, 3 and 2 lines, each said once it is audited, the last at the whole file
    assert [line.split(" so far")[0] for line in said] == [f"{path}: {n} traces audited" for n in (3, 6, 7) * 2]
    assert "(100% of the file)" in said[2] and "(100% of the file)" in said[5] and "(100%" not in said[1]
    assert (one.traces, one.fields, dict(one.skipped)) == (two.traces, two.fields, dict(two.skipped)) == \
        (7, 14, {"duplicate id": 1})
    assert A.read_fields(tmp_path / "one").equals(A.read_fields(tmp_path / "two"))


def _bundled_jsonl(tmp_path: Path) -> Path:
    traces = load_traces(CONFIGS / "phantom" / "traces.yaml")[0]
    path = tmp_path / "bundled.jsonl"
    path.write_text("".join(t.model_dump_json(exclude_none=True) + "\n" for t in traces), encoding="utf-8")
    return path


def _label_with_gold(sheet: Path, fields: pl.DataFrame, labelled: Path) -> None:
    gold = {(r["trace"], r["field"], r["model"], r["condition"], r["run"]): r["gold"]
            for r in fields.iter_rows(named=True)}
    with sheet.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["label"] = "phantom" if gold[(r["trace"], r["field"], r["model"], r["condition"], int(r["run"]))] \
            else "grounded"
    with labelled.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_a_labelled_sample_of_the_bundled_traces_reproduces_precision_and_recall(tmp_path: Path) -> None:
    """Gold as the person: labelling every unit gives the baseline's precision / recall against gold, by hand."""
    path = _bundled_jsonl(tmp_path)
    A.audit_files([path], tmp_path / "a", workers=1)
    fields = A.read_fields(tmp_path / "a")
    traces = load_traces(CONFIGS / "phantom" / "traces.yaml")[0]
    tp = fp = fn = 0
    for t in traces:  # the hand count, from the traces and the rule
        flagged, gold = set(baseline_fields(t, False)), set(t.gold_phantoms or ())
        tp, fp, fn = tp + len(flagged & gold), fp + len(flagged - gold), fn + len(gold - flagged)
    sheet = tmp_path / "sheet.csv"
    assert write_sheet(fields, [str(path)], sheet, n=10_000, seed=1) == fields.height
    _label_with_gold(sheet, fields, tmp_path / "labelled.csv")
    scores, rates = calibrate(fields, read_labels(tmp_path / "labelled.csv"), seed=0)
    row = scores.filter(pl.col("scorer") == "baseline").row(0, named=True)
    assert (row["tp"], row["fp"], row["fn"]) == (tp, fp, fn)
    assert row["precision"] == pytest.approx(tp / (tp + fp)) and row["recall"] == pytest.approx(tp / (tp + fn))
    assert scores.drop("units").equals(scores_against(fields, "gold", seed=0).drop("units"))
    # every unit labelled: the calibrated rate is the gold phantom rate
    assert rates.row(0, named=True)["calibrated_rate"] == pytest.approx(fields["gold"].mean())


def test_a_stratified_sample_of_an_auditor_run_reproduces_its_scores_on_the_labelled_units(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert cli.invoke(app, ["run", str(CONFIGS / "phantom.yaml"), "--out", str(out)]).exit_code == 0
    result = cli.invoke(app, ["audit", str(_bundled_jsonl(tmp_path)), "--out", str(tmp_path / "a"),
                              "--run", str(out), "--listings", str(tmp_path / "l")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "l" / "auditor_phantom.jsonl").is_file() and (tmp_path / "l" / "baseline_phantom.jsonl").is_file()
    fields = A.read_fields(tmp_path / "a")
    assert fields["auditor"].is_not_null().any() and fields["model"].n_unique() == 4
    # equivalence: the direct baseline path flags what the sweep's baseline flagged, trace by trace
    A.audit_files([_bundled_jsonl(tmp_path)], tmp_path / "direct", workers=1)
    direct = A.read_fields(tmp_path / "direct").select("trace", "field", "baseline").sort("trace", "field")
    swept = (fields.filter(pl.col("condition") == "results_visible").select("trace", "field", "baseline")
             .unique().sort("trace", "field"))
    assert swept.equals(direct)
    result = cli.invoke(app, ["sample", str(tmp_path / "a"), "--n", "120", "--seed", "3"])
    assert result.exit_code == 0, result.output
    sheet = tmp_path / "a" / "sample.csv"
    with sheet.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 120 and all(r["label"] == "" and r["context"] for r in rows)
    assert len({r["stratum"] for r in rows}) > 6  # across tools, flagged / unflagged, agreements / disagreements
    _label_with_gold(sheet, fields, tmp_path / "labelled.csv")
    labels = read_labels(tmp_path / "labelled.csv")
    scores, _ = calibrate(fields, labels, seed=0)
    keys = ["model", "condition", "run", "trace", "field"]
    labelled = fields.join(labels, on=keys)
    for r in scores.iter_rows(named=True):  # each scorer's counts on the labelled units, by hand
        sub = labelled.filter((pl.col("model") == r["model"]) & (pl.col("condition") == r["condition"])
                              & pl.col("auditor").is_not_null())
        p, g = sub[r["scorer"]].to_numpy().astype(bool), sub["gold"].to_numpy().astype(bool)
        assert (r["tp"], r["fp"], r["fn"]) == ((p & g).sum(), (p & ~g).sum(), (~p & g).sum())
    result = cli.invoke(app, ["audit", str(tmp_path / "a"), "--labels", str(tmp_path / "labelled.csv")])
    assert result.exit_code == 0, result.output
    assert "against people" in result.output and "calibrated" in result.output


def test_the_sheet_escapes_formulas_and_the_labels_read_back(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", GOLDLESS)
    A.audit_files([path], tmp_path / "a", workers=1)
    fields = A.read_fields(tmp_path / "a")
    write_sheet(fields, [str(path)], tmp_path / "s.csv", n=100, seed=0)
    text = (tmp_path / "s.csv").read_text(encoding="utf-8")
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text
    sample = draw_sample(fields, 3, seed=0)
    assert sample["stratum"].n_unique() == 3  # one from each of three strata before a second from any
    (tmp_path / "bad.csv").write_text("label,model,condition,run,trace,field\nmaybe,,results_visible,0,a1,x\n")
    with pytest.raises(UserError, match="neither phantom nor grounded"):
        read_labels(tmp_path / "bad.csv")


def test_findings_are_keyed_by_the_source_ids_and_otel_ones_are_evaluation_events(tmp_path: Path) -> None:
    A.audit_files([_write(tmp_path / "t.jsonl", GOLDLESS)], tmp_path / "a", workers=1)
    fields = A.read_fields(tmp_path / "a")
    found = list(findings(fields))
    assert {(f["trace_id"], f["span_id"], f["call_id"], f["field"]) for f in found} == {
        ("T-a2", "S-a2", "call-a2", "refund_order.order_id"), ("T-b1", "S-b1", "call-b1", "refund_order.email"),
        ("T-b2", "S-b2", "call-b2", "refund_order.email"), ("T-c", "S-c2", "call-c2", "refund_order.order_id")}
    assert all(f["flagged_by"] == ["baseline"] for f in found)
    event = evaluation_event(found[0])
    assert event is not None and event["eventName"] == "gen_ai.evaluation.result"
    attrs = {a["key"]: a["value"] for a in event["attributes"]}
    assert attrs["gen_ai.evaluation.name"] == {"stringValue": "trialgrid.phantom_field"}
    assert attrs["gen_ai.evaluation.score.label"] == {"stringValue": "phantom"}
    assert "gen_ai.evaluation.score.value" in attrs and "gen_ai.evaluation.explanation" in attrs
    assert (event["traceId"], event["spanId"]) == (found[0]["trace_id"], found[0]["span_id"])
    n, events = write_findings(fields, tmp_path / "f" / "findings.jsonl")
    assert (n, events) == (4, 4) and (tmp_path / "f" / "findings.otel.jsonl").is_file()


def test_findings_and_their_events_are_each_flagged_row_as_written_out_by_hand() -> None:
    """Read a column at a time, each finding is its row as the format defines it: the source ids, the field, who
    flagged it (an auditor-only flag with no baseline verdict too), nulls left out, and a table without the
    optional columns (an older audit) has none of them; its event carries a call id only where there is one."""
    rows = pl.DataFrame({
        "model": ["", "m", "m", "m"], "condition": ["results_visible"] * 4, "run": [0, 1, 1, 2],
        "trace": ["t2", "t1", "t1", "t3"], "conversation": ["c:a", "c:b", "c:b", "t:x"],
        "tool": ["refund", "refund", "send", "send"], "field": ["refund.id", "refund.id", "send.to", "send.to"],
        "baseline": [True, None, False, False], "auditor": [None, True, True, False], "gold": [None, True, None, None],
        "trace_id": ["T2", "T1", "T1", "T3"], "span_id": [None, "S1", "S1", "S3"], "call_id": ["k2", None, "k1", "k3"],
        "arg": ["id", "id", "to", "to"], "value": ["7", "8", "a@b", "c@d"],
        "source_format": ["otel-genai", "otlp", "openai-chat", "otlp"], "source_file": ["f"] * 4,
        "source_record": [1, 2, 2, 3]})

    def by_hand(r: dict) -> dict:
        rec = {"trace_id": r.get("trace_id"), "span_id": r.get("span_id"), "call_id": r.get("call_id"),
               "trace": r["trace"], "conversation": r["conversation"], "field": r["field"], "tool": r["tool"],
               "arg": r.get("arg"), "value": r.get("value"),
               "flagged_by": [s for s in ("baseline", "auditor") if r[s]], "baseline": r["baseline"],
               "auditor": r["auditor"], "gold": r.get("gold"), "model": r["model"] or None, "condition": r["condition"],
               "run": r["run"], "source_format": r.get("source_format"), "source_file": r.get("source_file"),
               "source_record": r.get("source_record")}
        return {k: v for k, v in rec.items() if v is not None}

    for table in (rows, rows.drop("trace_id", "span_id", "call_id", "arg", "value", "gold", "source_format",
                                  "source_file", "source_record")):
        flagged = table.filter(pl.col("baseline") | pl.col("auditor").fill_null(False)).sort(
            "model", "condition", "trace", "run", "field")
        want = [by_hand(r) for r in flagged.iter_rows(named=True)]
        got = list(findings(table))
        assert got == want and [list(f) for f in got] == [list(f) for f in want]  # the keys in the same order
    got = list(findings(rows))
    assert [f["flagged_by"] for f in got] == [["baseline"], ["auditor"], ["auditor"]]  # t2, then t1's two
    events = [evaluation_event(f) for f in got]
    assert events[2] is None  # a Chat Completions source: no span to parent an event to
    keys = [[a["key"] for a in e["attributes"]] for e in events[:2]]
    assert "gen_ai.tool.call.id" in keys[0] and "gen_ai.tool.call.id" not in keys[1]
    assert "spanId" not in events[0] and events[1]["spanId"] == "S1"
    flagged_by = {a["key"]: a["value"] for a in events[1]["attributes"]}["trialgrid.phantom.flagged_by"]
    assert flagged_by == {"arrayValue": {"values": [{"stringValue": "auditor"}]}}


def test_calls_without_arguments_are_audited_with_no_field(tmp_path: Path) -> None:
    """Nothing to count is an empty counts table with its columns, and a report of it, not a crash."""
    traces = [_trace("e1", "conv-e", "Ping the service", {}), _trace("e2", "conv-e", "Ping again", {})]
    result = CliRunner().invoke(app, ["audit", str(_write(tmp_path / "t.jsonl", traces)), "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert "audited 2 trace(s), 2 call(s), 0 field(s)" in result.output
    counts = A.read_counts(tmp_path / "a")
    assert counts.height == 0 and counts.columns == [*A.COUNT_KEYS, "units_n"]


def test_audit_command_is_offline_reports_and_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", GOLDLESS)
    result = cli.invoke(app, ["audit", str(path), "--out", str(tmp_path / "a"), "--workers", "1",
                              "--findings", str(tmp_path / "f.jsonl")])
    assert result.exit_code == 0, result.output
    assert "nothing left this machine" in result.output and "refund_order.order_id" in result.output
    assert len((tmp_path / "f.jsonl").read_text().splitlines()) == 4
    assert cli.invoke(app, ["audit", str(path)]).exit_code == 2
    result = cli.invoke(app, ["audit", str(_write(tmp_path / "bad.jsonl", [], ["nope"])), "--out",
                              str(tmp_path / "b"), "--workers", "1"])
    assert result.exit_code == 2 and "no trace could be audited" in result.output
    assert "Traceback" not in result.output


@pytest.mark.filterwarnings("ignore:.*7 traces")
def test_a_gold_less_phantom_sweep_reports_flag_rates_and_agreement(tmp_path: Path) -> None:
    import runner

    _write(tmp_path / "t.jsonl", GOLDLESS)
    (tmp_path / "s.yaml").write_text("name: s\nmodels: [{name: a, provider: sim, model: auditor-balanced}]\n"
                                     "probes: [{kind: phantom, traces: t.jsonl, runs: 2}]\n")
    runner.run(runner.load_sweep(tmp_path / "s.yaml"), tmp_path / "o", quiet=True)
    summary = runner.load_summary(tmp_path / "o")
    views = {v.key: v for v in summary.probe_views(summary.runs[0], "phantom")}
    assert views["fields"].table.height == 0  # no gold: no precision / recall
    rates = views["flag_rates"].table
    row = rates.filter((pl.col("condition") == "results_visible") & (pl.col("field") == "refund_order.order_id"))
    assert row["audits"].item() == 12 and row["conversations"].item() == 3 and row["baseline_flagged"].item() == 4
    assert views["agreement"].table.height == 2
    assert {"auditor_phantom", "baseline_phantom"} <= set(views)


@pytest.mark.filterwarnings("ignore:.*7 traces")
def test_report_findings_of_a_phantom_run_are_keyed_by_the_source_ids(tmp_path: Path) -> None:
    import runner

    _write(tmp_path / "t.jsonl", GOLDLESS)
    (tmp_path / "s.yaml").write_text("name: s\nmodels: [{name: a, provider: sim, model: auditor-strict}]\n"
                                     "probes: [{kind: phantom, traces: t.jsonl, runs: 1}]\n")
    runner.run(runner.load_sweep(tmp_path / "s.yaml"), tmp_path / "o", quiet=True)
    result = cli.invoke(app, ["report", str(tmp_path / "o"), "--findings", str(tmp_path / "f.jsonl")])
    assert result.exit_code == 0, result.output
    found = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert found and all(f["model"] == "a" and f["span_id"] == f"S-{f['trace']}" for f in found)
    # every baseline flag of the run is a finding, in both conditions
    assert {(f["trace"], f["field"]) for f in found if "baseline" in f["flagged_by"]} >= {
        ("a2", "refund_order.order_id"), ("b1", "refund_order.email")}
    assert (tmp_path / "f.otel.jsonl").is_file()
    assert cli.invoke(app, ["report", str(tmp_path / "o"), str(tmp_path / "o"), "--findings",
                            str(tmp_path / "g.jsonl")]).exit_code == 2


def test_the_report_from_per_conversation_counts_matches_the_whole_table(tmp_path: Path) -> None:
    from runner.probes.phantom.report import COUNT

    rng = np.random.default_rng(3)
    traces = []
    for c in range(120):  # conversations of 1–6 calls; some arguments from the context, some not
        user, results = f"Refund ORD-{c} for u{c}@x.test", []
        for t in range(int(rng.integers(1, 7))):
            args = {"order_id": f"ORD-{c if rng.random() < 0.8 else c + 1000}",
                    "email": f"u{c}@x.test" if rng.random() < 0.7 else "x@y.test", "amount": int(rng.integers(9))}
            traces.append(_trace(f"{c}-{t}", f"conv-{c}" if c % 9 else None, user, args, list(results),
                                 tool=("refund_order", "get_order")[t % 2]))
            results.append({"tool": "get_order", "result": {"amount": args["amount"]}})
    A.audit_files([_write(tmp_path / "t.jsonl", traces)], tmp_path / "a", workers=1)
    whole = A.read_fields(tmp_path / "a", A.VIEW_COLUMNS)
    counts = A.read_counts(tmp_path / "a")
    assert counts[COUNT].sum() == whole.height and counts.height < whole.height
    assert (tmp_path / "a" / A.COUNTS_FILE).is_file()  # summed while auditing; without it, summed from the table
    (tmp_path / "a" / A.COUNTS_FILE).unlink()
    assert A.read_counts(tmp_path / "a").equals(counts)
    assert flag_rates(counts, seed=0).equals(flag_rates(whole, seed=0))
    # an auditor and gold beside the baseline (a deterministic pseudo-verdict per unit): kappa and gold scores too
    h = whole["trace"].hash(1) ^ whole["field"].hash(2)
    both = whole.with_columns(auditor=pl.when(h % 7 == 0).then(None).otherwise(h % 5 < 2),
                              gold=pl.when(h % 11 == 0).then(None).otherwise(h % 3 == 0))
    agg = both.group_by(list(A.COUNT_KEYS)).agg(pl.len().cast(pl.Int64).alias(COUNT))
    assert flag_rates(agg, seed=0).equals(flag_rates(both, seed=0))
    assert agreement(agg, seed=0).equals(agreement(both, seed=0))
    assert scores_against(agg, "gold", seed=0).equals(scores_against(both, "gold", seed=0))


def test_counts_summed_while_auditing_are_a_group_by_of_the_table(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``ClusterCounts`` fed in small batches, merged often, against polars' group_by of the whole table."""
    from runner.probes.phantom.report import COUNT

    rng = np.random.default_rng(5)
    n = 5_000
    convs = rng.integers(0, 400, n)  # conversations spread over every batch, in no order
    table = pl.DataFrame({
        "model": rng.choice(["", "m1", "m2"], n), "condition": rng.choice(["results_visible", "results_hidden"], n),
        "conversation": [f"c:{c}" if c % 7 else f"t:{c:032x}" for c in convs],
        "field": rng.choice([f"tool{t}.arg{a}" for t in range(5) for a in range(3)] + ["odd\x1f.näme"], n),
        "baseline": rng.random(n) < 0.3,
        "auditor": pl.Series(rng.random(n) < 0.5).set(pl.Series(rng.random(n) < 0.2), None),
        "gold": pl.Series(rng.random(n) < 0.4).set(pl.Series(rng.random(n) < 0.6), None),
    })
    monkeypatch.setattr(A, "_MERGE_ROWS", 97)
    counts = A.ClusterCounts()
    for lo in range(0, n, 333):
        counts.add(table.slice(lo, 333).to_arrow().to_batches()[0])
    got = counts.table()
    want = table.group_by(list(A.COUNT_KEYS)).agg(pl.len().cast(pl.Int32).alias(COUNT)).with_columns(
        pl.col("conversation").rank("dense").cast(pl.Int32))
    key = list(A.COUNT_KEYS)
    assert got.sort(key, nulls_last=True).equals(want.sort(key, nulls_last=True))
    assert got[COUNT].sum() == n
    # written a slice (a row group) at a time, read back whole: the same table, and the same rates as one chunk
    monkeypatch.setattr(A, "_COUNT_ROWS", 50)
    counts.write(tmp_path / "counts.parquet")
    assert pl.read_parquet(tmp_path / "counts.parquet").equals(got)
    chunked = pl.concat([got.slice(lo, 700) for lo in range(0, got.height, 700)], rechunk=False)
    assert min(chunked.n_chunks("all")) > 1
    assert flag_rates(chunked, seed=0).equals(flag_rates(got.rechunk(), seed=0))
    empty = A.ClusterCounts()
    empty.write(tmp_path / "empty.parquet")
    assert pl.read_parquet(tmp_path / "empty.parquet").schema == got.schema


def test_a_conversation_shares_one_context_and_its_verdicts_are_those_of_a_fresh_one() -> None:
    from runner.core.jsonwalk import leaves
    from runner.probes.grounding import GroundingContext, check_call, fields_of

    traces = [A.Trace.model_validate(t) for t in GOLDLESS]
    shown = [t.shown(True)["context"] for t in traces]
    assert GroundingContext.of_values(shown[0]) is GroundingContext.of_values(shown[1])  # a1, a2: one context
    for trace, ctx in zip(traces, shown, strict=True):
        fresh = GroundingContext(str(v) for _, v in leaves(ctx) if v is not None)
        expected = fields_of(f for c in trace.calls for f in check_call(c.tool, c.args, fresh))
        assert baseline_fields(trace, hide_results=True) == expected

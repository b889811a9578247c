"""Calibrate an audit against people, and join its findings back to the source (the AgentProp-Bench method).

A flag rate without gold says how often a scorer flags, not how often it is right. So a person labels a
sample, and the labels turn each verdict into a probability: P(person says phantom | verdict). That gives
each scorer's precision and recall against people, and a calibrated phantom rate,
Σ_v P(phantom | v) · share(v), the verdict shares taken from the whole audit.

- **The sheet** (``write_sheet``): a stratified sample of (audit, field) units — strata are tool ×
  baseline verdict × auditor verdict (flagged / unflagged, agreement / disagreement) — with up to ``n``
  rows spread evenly over the strata (a small stratum is taken whole), in a seeded order. Each row gives
  the value and a context excerpt and an empty ``label`` column; every text cell is escaped against
  spreadsheet formulas (``runner.core.safety.csv_cell``).
- **The labels** (``read_labels``): the same sheet with ``label`` filled in (phantom / grounded, or
  yes / no, 1 / 0); blank rows are not labelled and left out.
- **The scores** (``calibrate``): precision and recall of each scorer against the labels, over the labelled
  units, clustered by conversation (``report.scores_against``). The sample is stratified, so these
  are the scores on the sample, not the population: the calibrated rate is the population figure.
- **The views** (``audit_views``): what `trialgrid audit` prints — gold scores where gold exists, the
  gold-free views, and with labels the scores against people and the calibrated rates.
- **Findings** (``findings``): one JSON line per flagged field, keyed by the source's ids, and for
  OpenTelemetry sources a ``gen_ai.evaluation.result`` event (the GenAI semantic conventions' evaluation
  event: ``gen_ai.evaluation.name``, ``.score.value``, ``.score.label``, ``.explanation``) parented to the
  span the call came from.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import stats
from runner.core.constants import CONFIDENCE, INTERVAL_METHOD
from runner.core.errors import UserError
from runner.core.safety import csv_cell
from runner.core.views import Format, ProbeView, ViewColumn
from runner.probes.phantom.audit import AuditSummary, iter_traces
from runner.probes.phantom.probe import Trace
from runner.probes.phantom.report import scores_against
from runner.probes.phantom.scores import gold_free_views

SHEET_COLUMNS = ("sample_id", "label", "tool", "field", "value", "context", "baseline", "auditor", "model",
                 "condition", "run", "trace", "conversation", "stratum", "stratum_size", "trace_id", "span_id",
                 "call_id")
#: a context excerpt is cut to this many characters
EXCERPT_CHARS = 600
_PHANTOM = {"phantom", "p", "yes", "y", "1", "true", "ungrounded"}
_GROUNDED = {"grounded", "g", "no", "n", "0", "false"}


def _verdict(v: bool | None) -> str:
    return "-" if v is None else ("flagged" if v else "unflagged")


def strata(fields: pl.DataFrame) -> pl.DataFrame:
    """``fields`` with its ``stratum`` (tool | baseline verdict | auditor verdict) and the stratum's size."""
    return fields.with_columns(pl.concat_str(
        pl.col("tool"), pl.lit(" | baseline "),
        pl.when(pl.col("baseline")).then(pl.lit("flagged")).otherwise(pl.lit("unflagged")),
        pl.lit(" | auditor "),
        pl.when(pl.col("auditor").is_null()).then(pl.lit("-"))
        .when(pl.col("auditor")).then(pl.lit("flagged")).otherwise(pl.lit("unflagged"))).alias("stratum"),
    ).with_columns(pl.len().over("stratum").alias("stratum_size"))


def draw_sample(fields: pl.DataFrame, n: int, seed: int) -> pl.DataFrame:
    """Up to ``n`` units spread evenly over the strata (each stratum's share rounded, small strata whole), in a
    seeded random order within each stratum."""
    if n < 1:
        raise UserError(f"--n must be at least 1, got {n}")
    table = strata(fields)
    rng = np.random.default_rng(seed)
    table = table.with_columns(pl.Series("_order", rng.permutation(table.height)))
    sizes = dict(table.group_by("stratum").len().sort("stratum").iter_rows())
    quota = {s: 0 for s in sizes}
    left = min(n, table.height)
    while left:  # water-filling: one unit at a time to every stratum that still has units
        open_ = [s for s in sorted(sizes) if quota[s] < sizes[s]]
        for s in open_[:left]:
            quota[s] += 1
        left -= min(len(open_), left)
    picked = (table.sort("_order").with_columns(pl.int_range(pl.len()).over("stratum").alias("_rank"))
              .filter(pl.col("_rank") < pl.col("stratum").replace_strict(quota, return_dtype=pl.Int64)))
    return picked.sort("stratum", "_order").drop("_order", "_rank")


def _excerpt(trace: Trace, value: str) -> str:
    """The context the auditor saw, cut around the value where it occurs (else its end, the latest turns)."""
    text = json.dumps(trace.shown(False)["context"], ensure_ascii=False)
    if len(text) <= EXCERPT_CHARS:
        return text
    at = text.lower().find(value.lower()[:40]) if value else -1
    if at < 0:
        return "…" + text[-(EXCERPT_CHARS - 1):]
    start = max(0, at - EXCERPT_CHARS // 2)
    return ("…" if start else "") + text[start:start + EXCERPT_CHARS - 2] + "…"


def _contexts(files: list[str], wanted: dict[int, set[int]]) -> dict[tuple[int, int], Trace]:
    """The traces at the wanted (file, line) positions, read in one pass over each file."""
    out: dict[tuple[int, int], Trace] = {}
    for index, name in enumerate(files):
        lines = wanted.get(index)
        if not lines:
            continue
        for line, trace in iter_traces(Path(name), AuditSummary()):
            if line in lines:
                out[(index, line)] = trace
    return out


def write_sheet(fields: pl.DataFrame, files: list[str], out: Path, n: int, seed: int) -> int:
    """Write the labelling sheet of ``n`` stratified units to ``out`` (CSV); return the rows written."""
    sample = draw_sample(fields, n, seed)
    wanted: dict[int, set[int]] = {}
    for f, line in sample.select("file", "line").iter_rows():
        if f is not None and line is not None:
            wanted.setdefault(int(f), set()).add(int(line))
    traces = _contexts(files, wanted)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(SHEET_COLUMNS)
        for i, r in enumerate(sample.iter_rows(named=True)):
            trace = traces.get((r["file"], r["line"]))
            row = {**r, "sample_id": i + 1, "label": "", "baseline": _verdict(r["baseline"]),
                   "auditor": _verdict(r["auditor"]),
                   "context": _excerpt(trace, r["value"] or "") if trace is not None else ""}
            writer.writerow([csv_cell(row.get(c)) for c in SHEET_COLUMNS])
    return sample.height


def read_labels(path: Path) -> pl.DataFrame:
    """The labelled rows of a filled-in sheet: the sheet's keys with ``person`` (True: phantom)."""
    try:
        fh = path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise UserError(f"cannot read the labels: {exc.strerror}", file=path) from None
    rows: list[dict[str, Any]] = []
    with fh:
        reader = csv.DictReader(fh)
        missing = {"label", "model", "condition", "run", "trace", "field"} - set(reader.fieldnames or ())
        if missing:
            raise UserError(f"not a labelling sheet: no column {', '.join(sorted(missing))}", file=path, line=1,
                            hint="label the sheet `trialgrid sample` wrote, keeping its columns")
        for line, r in enumerate(reader, start=2):
            raw = (r["label"] or "").strip().lower()
            if not raw:
                continue
            if raw not in _PHANTOM | _GROUNDED:
                raise UserError(f"label {r['label']!r} is neither phantom nor grounded", file=path, line=line,
                                key_path=("label",), hint="write phantom or grounded (or yes / no, 1 / 0)")
            try:
                run = int(r["run"])
            except ValueError:
                raise UserError(f"run {r['run']!r} is not a number", file=path, line=line, key_path=("run",)) from None
            # the sheet's cells were escaped against formulas: undo the leading ' on the keys
            rows.append({"model": _unescape(r["model"]), "condition": _unescape(r["condition"]), "run": run,
                         "trace": _unescape(r["trace"]), "field": _unescape(r["field"]), "person": raw in _PHANTOM})
    if not rows:
        raise UserError("no row of the sheet is labelled", file=path, hint="fill in the label column")
    return pl.DataFrame(rows, schema={"model": pl.String, "condition": pl.String, "run": pl.Int32,
                                      "trace": pl.String, "field": pl.String, "person": pl.Boolean})


def _unescape(cell: str) -> str:
    return cell[1:] if cell.startswith("'") and cell[1:2] in ("=", "+", "-", "@", "\t", "\r") else cell


CALIBRATED_SCHEMA = pl.Schema({"model": pl.String, "condition": pl.String, "scorer": pl.String,
                               "p_phantom_if_flagged": pl.Float64, "p_phantom_if_unflagged": pl.Float64,
                               "flag_rate": pl.Float64, "calibrated_rate": pl.Float64, "labelled": pl.Int64})


def calibrate(fields: pl.DataFrame, labels: pl.DataFrame, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(precision / recall of each scorer against the labels, clustered by conversation; the calibrated
    phantom rates). A label whose unit is not in the audit is refused."""
    keys = ["model", "condition", "run", "trace", "field"]
    joined = fields.join(labels, on=keys, how="inner")
    if joined.height < labels.height:
        raise UserError(f"{labels.height - joined.height} labelled row(s) name no unit of this audit",
                        hint="label the sheet sampled from this audit directory")
    scores = scores_against(joined, "person", seed)
    out: list[dict[str, Any]] = []
    for (model, condition), sub in joined.group_by("model", "condition", maintain_order=True):
        whole = fields.filter((pl.col("model") == model) & (pl.col("condition") == condition))
        for s in ("auditor", "baseline"):
            if not sub[s].is_not_null().any():
                continue
            known = sub.filter(pl.col(s).is_not_null())
            pf, pu = (known.filter(pl.col(s) == v)["person"].mean() for v in (True, False))
            share = whole.filter(pl.col(s).is_not_null())[s].mean()
            p_f = float(pf) if isinstance(pf, (int, float)) else float("nan")
            p_u = float(pu) if isinstance(pu, (int, float)) else float("nan")
            f = float(share) if isinstance(share, (int, float)) else float("nan")
            out.append({"model": model, "condition": condition, "scorer": s, "p_phantom_if_flagged": p_f,
                        "p_phantom_if_unflagged": p_u, "flag_rate": f,
                        "calibrated_rate": p_f * f + p_u * (1 - f), "labelled": known.height})
    return scores, pl.DataFrame(out, schema=CALIBRATED_SCHEMA).sort("model", "condition", "scorer")


#: the sources whose traces are OpenTelemetry traces, so a finding's event can be parented to its span: every
#: instrumentation the OTLP reader reads (the GenAI conventions, their older flattened attributes, OpenInference,
#: Langfuse's own SDK) and the ``otel`` / ``otlp`` names of hand-written traces
OTEL_FORMATS = ("otel-genai", "otel-genai-flat", "openinference", "langfuse", "otel", "otlp")


#: a finding's fields in the order it is written (``flagged_by`` after ``value``), each the field table's column
#: of that name; the optional ones (absent from older tables) are None where missing
_FINDING_COLUMNS = ("trace_id", "span_id", "call_id", "trace", "conversation", "field", "tool", "arg", "value",
                    "baseline", "auditor", "gold", "model", "condition", "run", "source_format", "source_file",
                    "source_record")
_OPTIONAL = frozenset({"trace_id", "span_id", "call_id", "arg", "value", "gold", "source_format", "source_file",
                       "source_record"})


def findings(fields: pl.DataFrame) -> Iterator[dict[str, Any]]:
    """One record per flagged (audit, field): the source's ids, the field, the value, who flagged it. Read a column
    at a time, not a row at a time (the live receiver writes two or three of these a call)."""
    flagged = fields.filter(pl.col("baseline") | pl.col("auditor").fill_null(False)).sort(
        "model", "condition", "trace", "run", "field")
    n = flagged.height
    columns = [flagged[c].to_list() if c not in _OPTIONAL or c in flagged.columns else repeat(None, n)
               for c in _FINDING_COLUMNS]
    for (trace_id, span_id, call_id, trace, conversation, field, tool, arg, value, baseline, auditor, gold, model,
         condition, run, source_format, source_file, source_record) in zip(*columns, strict=False):
        rec = {"trace_id": trace_id, "span_id": span_id, "call_id": call_id, "trace": trace,
               "conversation": conversation, "field": field, "tool": tool, "arg": arg, "value": value,
               "flagged_by": [s for s, v in (("baseline", baseline), ("auditor", auditor)) if v],
               "baseline": baseline, "auditor": auditor, "gold": gold, "model": model or None,
               "condition": condition, "run": run, "source_format": source_format, "source_file": source_file,
               "source_record": source_record}
        yield {k: v for k, v in rec.items() if v is not None}


def evaluation_event(finding: dict[str, Any]) -> dict[str, Any] | None:
    """A finding as a ``gen_ai.evaluation.result`` event (OTLP JSON log record shape), for an OTel source.

    The event and its attributes as ``model/gen-ai/events.yaml`` of github.com/open-telemetry/semantic-conventions
    (c1212d96) defines them: ``gen_ai.evaluation.name`` required, ``score.value`` a double, parented to the span
    being evaluated; pinned by ``tests/importers/test_otel_semconv_names.py``."""
    if finding.get("source_format") not in OTEL_FORMATS or not finding.get("trace_id"):
        return None
    by = finding["flagged_by"]
    attributes = [
        {"key": "gen_ai.evaluation.name", "value": {"stringValue": "trialgrid.phantom_field"}},
        {"key": "gen_ai.evaluation.score.value", "value": {"doubleValue": 1.0}},
        {"key": "gen_ai.evaluation.score.label", "value": {"stringValue": "phantom"}},
        {"key": "gen_ai.evaluation.explanation",
         "value": {"stringValue": f"{finding['field']} flagged as ungrounded by {' and '.join(by)}"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": str(finding["tool"])}}]
    call_id = finding.get("call_id")
    if call_id is not None:
        attributes.append({"key": "gen_ai.tool.call.id", "value": {"stringValue": str(call_id)}})
    attributes += [{"key": "trialgrid.phantom.field", "value": {"stringValue": str(finding["field"])}},
                   {"key": "trialgrid.phantom.flagged_by",
                    "value": {"arrayValue": {"values": [{"stringValue": str(x)} for x in by]}}}]
    rec = {"eventName": "gen_ai.evaluation.result", "traceId": finding["trace_id"], "spanId": finding.get("span_id"),
           "attributes": attributes}
    return {k: v for k, v in rec.items() if v is not None}


def write_findings(fields: pl.DataFrame, path: Path) -> tuple[int, int]:
    """Write the findings to ``path`` (JSON lines) and, where any come from an OTel source, their evaluation
    events to ``<path stem>.otel.jsonl`` beside it; return (findings, events) written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    otel = path.with_name(path.stem + ".otel.jsonl")
    n = events = 0
    with path.open("w", encoding="utf-8") as fh, otel.open("w", encoding="utf-8") as eh:
        for rec in findings(fields):
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
            event = evaluation_event(rec)
            if event is not None:
                eh.write(json.dumps(event, ensure_ascii=False) + "\n")
                events += 1
    if not events:
        otel.unlink()
    return n, events


_GOLD_COLUMNS = (ViewColumn("model", "model"), ViewColumn("condition", "condition"), ViewColumn("scorer", "scorer"),
                 ViewColumn("units", "fields", Format.COUNT),
                 ViewColumn("precision", "P", Format.SCORE, lo="precision_lo", hi="precision_hi"),
                 ViewColumn("recall", "R", Format.SCORE, lo="recall_lo", hi="recall_hi"),
                 ViewColumn("tp", "tp", Format.COUNT), ViewColumn("fp", "fp", Format.COUNT),
                 ViewColumn("fn", "fn", Format.COUNT))
_CALIBRATED_COLUMNS = (ViewColumn("model", "model"), ViewColumn("condition", "condition"),
                       ViewColumn("scorer", "scorer"), ViewColumn("labelled", "labelled", Format.COUNT),
                       ViewColumn("p_phantom_if_flagged", "P(phantom | flagged)", Format.RATE),
                       ViewColumn("p_phantom_if_unflagged", "P(phantom | unflagged)", Format.RATE),
                       ViewColumn("flag_rate", "flag rate", Format.RATE),
                       ViewColumn("calibrated_rate", "calibrated phantom rate", Format.RATE))


def audit_views(fields: pl.DataFrame, *, seed: int, labels: pl.DataFrame | None = None,
                name: str = "audit") -> list[ProbeView]:
    """The views of ``trialgrid audit`` over a field table: precision / recall against gold where any trace has
    it, the gold-free views, and with ``labels`` the scores against people and the calibrated rates."""
    interval = f"[{CONFIDENCE:.0%} {stats.INTERVAL_NAMES[INTERVAL_METHOD]} over conversations.]"
    views = []
    if fields["gold"].is_not_null().any():
        views.append(ProbeView("gold", f"{name} · against gold (traces that carry gold_phantoms)",
                               "Field-level precision and recall over (audit, argument) units whose trace has gold. "
                               + interval, scores_against(fields, "gold", seed), _GOLD_COLUMNS))
    views += gold_free_views(name, fields, seed=seed)
    if labels is not None:
        scores, rates = calibrate(fields, labels, seed)
        views.append(ProbeView("people", f"{name} · against people (the labelled sample)",
                               "Precision and recall over the labelled units (a stratified sample: scores on the "
                               f"sample, not the population). {interval}", scores, _GOLD_COLUMNS))
        views.append(ProbeView("calibrated", f"{name} · phantom rates calibrated by the labels",
                               "Σ over verdicts of P(person says phantom | verdict) × the verdict's share of the "
                               "whole audit.", rates, _CALIBRATED_COLUMNS))
    return views

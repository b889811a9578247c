"""``trialgrid import trials FILE.csv|.parquet``: per-trial data from another harness → a trialgrid output directory.

So the same report, statistics and plots run over trials trialgrid did not run. The
user maps columns: which holds the model (or one fixed model name), the cluster
(prompt / case / triple), the condition, each outcome (boolean-like: 1/0,
true/false, yes/no; empty = null), and optionally the run index, a status (rows
whose status is not the ``ok`` value become ``error`` rows — counted as errors,
never as a pass or a fail), and token counts.

The probe's kind decides what the report computes: a kind trialgrid knows (e.g.
``misselection``) brings its own rates and contrasts, and its rate columns must be
mapped; any other kind (default ``imported``) uses the mapped outcomes as rates, in
the order given, the first being the headline, and the ``--contrast`` specs given.
The manifest records the source file, its hash and the mapping; trial ids are a
stable hash of the source hash and the row's (model, cluster, condition, run), so
importing the same file twice gives the same ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from runner.core.columns import Column
from runner.core.errors import UserError
from runner.core.manifest import (
    FORMAT_VERSION,
    ImportRecord,
    Manifest,
    ModelSnapshot,
    ProbeRecord,
    RunStatus,
    SweepSnapshot,
    write_manifest,
)
from runner.core.schema import STATUS_ERROR, STATUS_OK, trial_schema
from runner.importers.output import run_output
from runner.importers.tables import read_table
from runner.output.sink import TrialSink
from runner.probes import PROBES, Contrast

_TRUE = {"1", "true", "t", "yes", "y", "1.0"}
_FALSE = {"0", "false", "f", "no", "n", "0.0"}


@dataclass(frozen=True)
class TrialsMapping:
    """Which source column feeds which trialgrid column."""

    cluster: str
    condition: str
    outcomes: dict[str, str]                 # trialgrid outcome name → source column
    model: str | None = None                 # source column with the model label
    model_name: str | None = None            # or one fixed label for every row
    run: str | None = None                   # run index column; default: order within the cell
    status: str | None = None
    ok_values: tuple[str, ...] = ("ok",)     # status values (case-insensitive) that mean the trial completed
    error: str | None = None                 # error text column
    input_tokens: str | None = None
    output_tokens: str | None = None
    probe: str = "imported"
    kind: str = "imported"
    contrasts: tuple[Contrast, ...] = field(default_factory=tuple)


def parse_contrast(spec: str) -> Contrast:
    """``label:outcome:A1+A2:B1`` → a Contrast (arm A minus arm B on ``outcome``)."""
    parts = spec.split(":")
    if len(parts) != 4 or not all(parts):
        raise UserError(f"--contrast {spec!r}: expected label:outcome:A_CONDITIONS:B_CONDITIONS "
                        "(conditions joined with +)")
    label, outcome, a, b = parts
    return Contrast(label=label, outcome=outcome, arm_a=tuple(a.split("+")), arm_b=tuple(b.split("+")))


def _bool(col: str, name: str) -> tuple[pl.Expr, pl.Expr]:
    text = pl.col(col).cast(pl.String).str.strip_chars().str.to_lowercase()
    return (pl.when(text.is_in(list(_TRUE))).then(True)
            .when(text.is_in(list(_FALSE))).then(False)
            .when(text.is_null() | (text == "")).then(None)
            .otherwise(pl.lit(None)).alias(name), text.is_in(list(_TRUE | _FALSE)) | text.is_null() | (text == ""))


def import_trials(source: Path, out: Path, mapping: TrialsMapping, *, force: bool = False) -> dict[str, int]:
    """Write ``source``'s rows as a trialgrid run at ``out``; return counts by status."""
    read = read_table(source, what="trials file")  # bounded by the input cap: the checks below need every row
    frame, sha = read.frame, read.sha256
    if frame.height == 0:
        raise UserError("the file has no rows", file=source, hint="nothing to import: check the file")
    if (mapping.model is None) == (mapping.model_name is None):
        raise UserError("give exactly one of --model COLUMN or --model-name NAME")
    if not mapping.outcomes:
        raise UserError("map at least one outcome column (--outcome COLUMN or NAME=COLUMN)")
    known = PROBES.get(mapping.kind)
    rates = tuple(known.rates) if known is not None else tuple(mapping.outcomes)
    unmapped = [r for r in (known.reply_rates if known is not None else ()) if r not in mapping.outcomes]
    missing_rates = [r for r in rates if r not in mapping.outcomes and r not in unmapped]
    if missing_rates:
        raise UserError(f"probe kind {mapping.kind!r} reports the rates {', '.join(rates)}; "
                        f"map {', '.join(missing_rates)} with --outcome NAME=COLUMN")
    wanted = [c for c in (mapping.cluster, mapping.condition, mapping.model, mapping.run, mapping.status,
                          mapping.error, mapping.input_tokens, mapping.output_tokens, *mapping.outcomes.values())
              if c is not None]
    absent = [c for c in wanted if c not in frame.columns]
    if absent:
        raise UserError(f"no column {absent[0]!r} in the file (columns: {', '.join(frame.columns)})", file=source)
    contrasts = mapping.contrasts if known is None else tuple(known.contrasts)
    for c in contrasts:
        if c.outcome not in mapping.outcomes:
            raise UserError(f"contrast {c.label!r} tests {c.outcome!r}, which is not a mapped outcome")
    if known is None and contrasts:
        present = frame[mapping.condition].cast(pl.String).drop_nulls().unique().to_list()
        for c in contrasts:
            unknown = [x for x in (*c.arm_a, *c.arm_b) if x not in present]
            if unknown:
                raise UserError(f"contrast {c.label!r} names the condition {unknown[0]!r}, which no row has",
                                file=source, hint=f"conditions in column {mapping.condition!r}: "
                                                  f"{', '.join(sorted(present)[:20])}")
    target = run_output(out, force=force)  # checked now, built beside --out and swapped in at the end

    sweep_id = hashlib.sha256(f"{sha}:{mapping.probe}:{mapping.kind}".encode()).hexdigest()[:16]
    model = pl.col(mapping.model).cast(pl.String) if mapping.model else pl.lit(mapping.model_name, pl.String)
    if mapping.status:
        ok = pl.col(mapping.status).cast(pl.String).str.strip_chars().str.to_lowercase().is_in(
            [v.lower() for v in mapping.ok_values])
    else:
        ok = pl.lit(True)
    outcome_exprs, checks = [], []
    for name, col in mapping.outcomes.items():
        expr, valid = _bool(col, name)
        outcome_exprs.append(pl.when(ok).then(expr).otherwise(None).alias(name))
        checks.append((name, col, valid))
    bad = frame.select([(~v).sum().alias(n) for n, _, v in checks]).row(0, named=True)
    for name, col, _ in checks:
        if bad[name]:
            example = frame.filter(~_bool(col, name)[1])[col].cast(pl.String).head(1).item()
            raise UserError(f"outcome column {col!r} has {bad[name]} value(s) that are not boolean (e.g. {example!r})",
                            file=source, hint="outcomes must be 1/0, true/false or yes/no; empty means null")
    base = frame.with_columns(model.alias("model"), pl.col(mapping.cluster).cast(pl.String).alias("case_id"),
                              pl.col(mapping.condition).cast(pl.String).alias("condition"), ok.alias("_ok"))
    if base.select(pl.col("model").is_null().any() | pl.col("case_id").is_null().any()
                   | pl.col("condition").is_null().any()).item():
        raise UserError("model, cluster and condition must be set on every row", file=source)
    run = (pl.col(mapping.run).cast(pl.Int32, strict=False) if mapping.run
           else pl.int_range(pl.len()).over("model", "case_id", "condition").cast(pl.Int32))
    rows = base.with_columns(run.alias("run"), *outcome_exprs)
    if rows["run"].null_count():
        raise UserError(f"run column {mapping.run!r} has values that are not integers", file=source)
    if rows.select(pl.struct("model", "case_id", "condition", "run").is_duplicated().any()).item():
        raise UserError("two rows share (model, cluster, condition, run)", file=source,
                        hint="map a --run column that tells them apart, or leave --run out to number rows per cell")
    key = pl.concat_str([pl.lit(sha), "model", "case_id", "condition", pl.col("run").cast(pl.String)], separator="\x1f")
    tokens = [pl.col(c).cast(pl.Int64, strict=False).alias(n) if c else pl.lit(None, pl.Int64).alias(n)
              for n, c in (("input_tokens", mapping.input_tokens), ("output_tokens", mapping.output_tokens))]
    error_text = (pl.col(mapping.error).cast(pl.String) if mapping.error else
                  pl.lit(None, pl.String))
    table = rows.select(
        pl.lit(sweep_id).alias("sweep_id"),
        key.map_elements(lambda s: hashlib.sha256(s.encode()).hexdigest()[:16], return_dtype=pl.String).alias("trial_id"),
        "model", pl.lit("imported").alias("provider"), pl.col("model").alias("model_id"),
        pl.lit(mapping.probe).alias("probe"), "case_id", "condition", "run", pl.lit(0, pl.Int64).alias("seed"),
        pl.when("_ok").then(pl.lit(STATUS_OK)).otherwise(pl.lit(STATUS_ERROR)).alias("status"),
        pl.when("_ok").then(None).otherwise(pl.lit("imported")).alias("error_kind"),
        pl.when("_ok").then(None).otherwise(error_text).alias("error"),
        *tokens, *mapping.outcomes, *(pl.lit(None, pl.Boolean).alias(r) for r in unmapped),
    )
    fields = [Column(n, "bool") for n in (*mapping.outcomes, *unmapped)]
    schema = trial_schema(fields, metadata={"trialgrid.sweep_id": sweep_id})
    with target as build:
        with TrialSink(build, schema, worker="import") as sink:
            for row in table.iter_rows(named=True):
                sink.append(row)
        counts = {k: int(v) for k, v in table["status"].value_counts().iter_rows()}
        now = datetime.now(UTC).isoformat(timespec="seconds")
        models = table["model"].unique(maintain_order=True).to_list()
        conditions = table["condition"].unique(maintain_order=True).to_list()
        probe_info = ProbeRecord(kind=mapping.kind, source_sha256=sha)
        if known is None:
            probe_info.rates = list(rates)
            probe_info.conditions = conditions
            probe_info.contrasts = [c.model_dump(mode="json") for c in contrasts]
        write_manifest(build, Manifest(
            format_version=FORMAT_VERSION, sweep_name=out.name or "imported", sweep_id=sweep_id,
            sweep_sha256=None, sweep_file=None,
            sweep=SweepSnapshot(name=out.name or "imported",
                                models=[ModelSnapshot(name=m, provider="imported", model=m) for m in models]),
            probes={mapping.probe: probe_info}, seed=0, trials_total=table.height, versions={},
            remedies=[],
            imported=ImportRecord(source=str(source), path=str(source.resolve()), sha256=sha,
                                  mapping={k: v for k, v in mapping.__dict__.items() if k != "contrasts"}
                                  | {"contrasts": [c.model_dump(mode="json") for c in contrasts]}),
            created_at=now, finished_at=now, sessions=[], counts=counts, status=RunStatus.COMPLETE,
        ))
    return counts


def parse_outcomes(specs: Sequence[str]) -> dict[str, str]:
    """``COLUMN`` or ``NAME=COLUMN`` → {name: column}, in the order given."""
    out: dict[str, str] = {}
    for spec in specs:
        name, _, col = spec.partition("=")
        name, col = (name, col) if col else (spec, spec)
        if not name or not col:
            raise UserError(f"--outcome {spec!r}: expected COLUMN or NAME=COLUMN")
        out[name.strip()] = col.strip()
    return out

"""Import AgentProp-Bench's released per-trace CSVs as a trialgrid run, so the same report runs over them.

AgentProp-Bench ("Evaluating Tool-Using Language Agents: Judge Reliability,
Propagation Cascades, and Runtime Mitigation") released per-session CSVs but no
step-level traces. This importer writes them as a trialgrid output directory
(``manifest.json`` + ``trials/*.arrow``) with four probes:

- ``interceptor`` (kind ``propagation``): ``interceptor_control_600.csv`` as condition
  ``control`` and ``interceptor_heldout_600.csv`` as ``control+interceptor``; the
  task id is the cluster and pairs the arms.
- ``p2`` (kind ``propagation``): ``p2_all_rejudged.csv``, condition ``param.<error_type>``;
  ``eps`` (0-2) gives S1 (``eps >= 1``) and S2 (``eps >= 2``); correct is the 2-of-3
  LLM ensemble (``ensemble_correct``); ``tool_called`` is ``tool_selected`` non-empty.
- ``baseline`` (kind ``propagation``): ``baseline_all_rejudged.csv`` as ``control``.
- ``judges`` (kind ``judge``): ``ensemble_judge.csv``, one row per (trace, LLM judge),
  the substring heuristic beside each; the released human labels are copied beside
  the run and named in the manifest.

Columns the CSVs do not have (steps, fabrication, interceptor flags) are null, never
guessed. Caveat carried into the manifest: the released harness scored API
exceptions as wrong answers, so some "wrong" rows may be failed calls; the CSVs do
not say which.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

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
from runner.core.safety import read_capped
from runner.core.schema import STATUS_OK, trial_schema
from runner.importers.output import run_output
from runner.importers.tables import Table, read_table
from runner.output.sink import TrialSink
from runner.probes.judge import JudgeProbe
from runner.probes.propagation import PropagationProbe

_SOURCE = "AgentProp-Bench per-trace CSVs"
JUDGES = ("gpt4o", "gemini_25_flash", "gpt4o_mini")
_REQUIRED = {
    "interceptor_control_600.csv": ("session_id", "task_id", "model", "domain", "abstained", "final_correct",
                                    "hallucination"),
    "interceptor_heldout_600.csv": ("session_id", "task_id", "model", "domain", "abstained", "final_correct",
                                    "hallucination"),
    "p2_all_rejudged.csv": ("session_id", "task_id", "model", "domain", "error_type", "tool_selected", "eps",
                            "ensemble_correct", "heuristic_correct", *(f"{j}_verdict" for j in JUDGES)),
    "baseline_all_rejudged.csv": ("session_id", "task_id", "model", "domain", "tool_selected", "ensemble_correct",
                                  "heuristic_correct", *(f"{j}_verdict" for j in JUDGES)),
    "ensemble_judge.csv": ("session_id", "model", "injection_type", "heuristic_correct", "candidate", "reference",
                           *(f"{j}_verdict" for j in JUDGES)),
}
_HUMAN_GLOB = "human_labels_*.csv"


def _read(path: Path) -> Table:
    table = read_table(path, what="AgentProp-Bench CSV")  # every column as text; typed below, explicitly
    frame = table.frame
    missing = [c for c in _REQUIRED[path.name] if c not in frame.columns]
    if missing:
        raise UserError(f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}", file=path, line=1,
                        hint="is this an AgentProp-Bench per-trace CSV of the released format?")
    return table


def _bool(col: str) -> pl.Expr:
    return pl.col(col).str.strip_chars().str.to_lowercase().is_in(["true", "1", "yes"])


def _int(col: str) -> pl.Expr:
    return pl.col(col).str.strip_chars().cast(pl.Int64, strict=False)


def _common(frame: pl.DataFrame, probe: str, condition: str, sweep_id: str) -> pl.DataFrame:
    return frame.with_columns(
        pl.lit(sweep_id).alias("sweep_id"), pl.col("session_id").alias("trial_id"), pl.lit("agentprop").alias("provider"),
        pl.col("model").alias("model_id"), pl.lit(probe).alias("probe"), pl.lit(condition).alias("condition"),
        pl.lit(0, pl.Int32).alias("run"), pl.lit(0, pl.Int64).alias("seed"), pl.lit(STATUS_OK).alias("status"),
    )


def _verdicts(frame: pl.DataFrame) -> pl.Expr:
    return pl.concat_list([pl.struct(pl.lit(name).alias("judge"), _bool(col).alias("verdict"))
                           for name, col in (("heuristic", "heuristic_correct"),
                                             *((j, f"{j}_verdict") for j in JUDGES),
                                             ("ensemble", "ensemble_correct"))]).alias("judge_verdicts")


def _interceptor(control: pl.DataFrame, heldout: pl.DataFrame, sweep_id: str) -> list[pl.DataFrame]:
    out = []
    for frame, condition in ((control, "control"), (heldout, "control+interceptor")):
        abstained = _bool("abstained")
        out.append(_common(frame, "interceptor", condition, sweep_id).with_columns(
            pl.col("task_id").alias("case_id"), pl.col("domain"), pl.lit(condition.endswith("+interceptor")).alias("interceptor"),
            _bool("final_correct").alias("correct"), pl.lit("agentprop final_correct").alias("correct_by"),
            (~_bool("final_correct") & ~abstained).alias("wrong_answer"), _bool("hallucination").alias("hallucinated"),
            abstained.alias("abstained"),
            pl.col("abstain_reason").alias("abstain_reason") if "abstain_reason" in frame.columns else pl.lit(None, pl.String).alias("abstain_reason"),
            pl.col("final_answer").alias("final_answer") if "final_answer" in frame.columns else pl.lit(None, pl.String).alias("final_answer"),
            (_int("steps").cast(pl.Int32) if "steps" in frame.columns else pl.lit(None, pl.Int32)).alias("turns"),
        ))
    return out


def _p2(frame: pl.DataFrame, sweep_id: str) -> pl.DataFrame:
    eps = _int("eps")
    wrong = ~_bool("ensemble_correct")
    return _common(frame, "p2", "", sweep_id).with_columns(
        ("param." + pl.col("error_type").str.strip_chars()).alias("condition"),
        pl.col("task_id").alias("case_id"), ("param." + pl.col("error_type").str.strip_chars()).alias("injection"),
        pl.lit(False).alias("interceptor"), (eps >= 1).alias("reached_s1"), (eps >= 2).alias("reached_s2"),
        pl.when((eps >= 2) & wrong).then(3).otherwise(eps.clip(0, 2)).cast(pl.Int8).alias("stage_reached"),
        _bool("ensemble_correct").alias("correct"), pl.lit("ensemble (2 of 3 LLM judges)").alias("correct_by"),
        wrong.alias("wrong_answer"), pl.lit(False).alias("abstained"),
        (pl.col("tool_selected").fill_null("").str.strip_chars().str.len_chars() > 0).alias("tool_called"),
        pl.col("final_answer"), _verdicts(frame),
    )


def _baseline(frame: pl.DataFrame, sweep_id: str) -> pl.DataFrame:
    extra = [_int(c).alias(c) for c in ("input_tokens", "output_tokens") if c in frame.columns]
    return _common(frame, "baseline", "control", sweep_id).with_columns(
        pl.col("task_id").alias("case_id"), pl.lit(False).alias("interceptor"), pl.lit(False).alias("reached_s1"),
        pl.lit(False).alias("reached_s2"), pl.lit(0, pl.Int8).alias("stage_reached"),
        _bool("ensemble_correct").alias("correct"), pl.lit("ensemble (2 of 3 LLM judges)").alias("correct_by"),
        (~_bool("ensemble_correct")).alias("wrong_answer"), pl.lit(False).alias("abstained"),
        (pl.col("tool_selected").fill_null("").str.strip_chars().str.len_chars() > 0).alias("tool_called"),
        (_int("steps").cast(pl.Int32) if "steps" in frame.columns else pl.lit(None, pl.Int32)).alias("turns"),
        pl.col("final_answer"), _verdicts(frame), *extra,
    )


def _judges(frame: pl.DataFrame, sweep_id: str) -> list[pl.DataFrame]:
    out = []
    for judge in JUDGES:
        out.append(_common(frame, "judges", "llm", sweep_id).with_columns(
            (pl.col("session_id") + ":" + judge).alias("trial_id"), pl.lit(judge).alias("model"),
            pl.lit(judge).alias("model_id"), pl.col("session_id").alias("case_id"),
            _bool(f"{judge}_verdict").alias("verdict"), pl.lit(False).alias("parse_failed"),
            _bool("heuristic_correct").alias("heuristic_verdict"), pl.col("model").alias("agent_model"),
            pl.col("injection_type").alias("stratum"), pl.col("candidate"), pl.col("reference"),
        ))
    return out


def import_agentprop(source: Path, out: Path, *, force: bool = False) -> dict[str, int]:
    """Convert the CSVs in ``source`` into a trialgrid run at ``out``; return rows written per probe."""
    if not source.is_dir():
        raise UserError("not a folder", file=source, hint="pass the folder holding AgentProp-Bench's CSVs")
    # whatever holds a known name is read (a FIFO or device there is refused by name, not skipped as absent)
    present = {name: source / name for name in _REQUIRED if os.path.lexists(source / name)}
    if not present:
        raise UserError(f"no AgentProp-Bench CSV found (expected some of {', '.join(_REQUIRED)})", file=source)
    target = run_output(out, force=force)  # checked now, built beside --out and swapped in at the end
    tables = {name: _read(path) for name, path in present.items()}
    frames = {name: t.frame for name, t in tables.items()}
    shas = {name: t.sha256 for name, t in tables.items()}
    humans = sorted(source.glob(_HUMAN_GLOB))
    sweep_id = hashlib.sha256(json.dumps(sorted(shas.items())).encode()).hexdigest()[:16]

    parts: dict[str, list[pl.DataFrame]] = {}
    if "interceptor_control_600.csv" in frames and "interceptor_heldout_600.csv" in frames:
        parts["interceptor"] = _interceptor(frames["interceptor_control_600.csv"],
                                            frames["interceptor_heldout_600.csv"], sweep_id)
    if "p2_all_rejudged.csv" in frames:
        parts["p2"] = [_p2(frames["p2_all_rejudged.csv"], sweep_id)]
    if "baseline_all_rejudged.csv" in frames:
        parts["baseline"] = [_baseline(frames["baseline_all_rejudged.csv"], sweep_id)]
    if "ensemble_judge.csv" in frames:
        parts["judges"] = _judges(frames["ensemble_judge.csv"], sweep_id)
    if not parts:
        raise UserError("the interceptor CSVs come as a pair: found only one of interceptor_control_600.csv and "
                        "interceptor_heldout_600.csv", file=source)

    schema = trial_schema([*PropagationProbe.outcome_fields,
                           *(f for f in JudgeProbe.outcome_fields if f.name not in {p.name for p in PropagationProbe.outcome_fields})],
                          metadata={"trialgrid.sweep_id": sweep_id})
    with target as build:
        counts: dict[str, int] = {}
        models: dict[str, None] = {}
        with TrialSink(build, schema, worker="import") as sink:
            for probe, frames_of in parts.items():
                for frame in frames_of:
                    # the CSVs' own `steps` is a count (kept as `turns`); trialgrid's `steps` holds step records
                    keep = [c for c in frame.columns if c in schema.names and c != "steps"]
                    for row in frame.select(keep).iter_rows(named=True):
                        sink.append(row)
                        models.setdefault(row["model"], None)
                    counts[probe] = counts.get(probe, 0) + frame.height
        label_dir = build / "human_labels"
        copied = []
        if humans and "judges" in parts:
            label_dir.mkdir(exist_ok=True)
            for path in humans:  # bounded and regular, as every input: a link to /dev/zero must not fill the disk
                (label_dir / path.name).write_bytes(read_capped(path, what="human labels file"))
                copied.append(f"human_labels/{path.name}")
        now = datetime.now(UTC).isoformat(timespec="seconds")
        probes = {name: ProbeRecord(kind="judge" if name == "judges" else "propagation") for name in parts}
        if "judges" in probes:
            probes["judges"].human_labels = copied
            probes["judges"].ensemble = list(JUDGES)
        total = sum(counts.values())
        write_manifest(build, Manifest(
            format_version=FORMAT_VERSION, sweep_name="agentprop-import", sweep_id=sweep_id, sweep_sha256=None,
            sweep_file=None,
            sweep=SweepSnapshot(name="agentprop-import",
                                models=[ModelSnapshot(name=m, provider="agentprop", model=m) for m in models]),
            probes=probes, seed=42, trials_total=total, versions={}, remedies=[],
            imported=ImportRecord(
                source=_SOURCE, path=str(source.resolve()), files=shas,
                caveat="the released harness scored API exceptions as wrong answers; the CSVs do not mark them"),
            created_at=now, finished_at=now, sessions=[], counts={STATUS_OK: total}, status=RunStatus.COMPLETE,
        ))
    return counts

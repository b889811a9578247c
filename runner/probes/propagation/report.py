"""The propagation probe's own views: hop rates, rejection vs recovery, fabrication, interceptor effect.

Computed from the trial rows with polars (per-task counts) and ``stats`` (tilted
Korn–Graubard cluster intervals, a paired difference with a cluster bootstrap interval
and exact McNemar, Spearman), so the same views come out of a live run and of
AgentProp's imported CSVs. Captions name the interval each table holds; only the
paired difference draws resamples.

- **Hop rates** per model × injected condition: P(S3 | S2), P(S3 | S1), P(S2 | S1),
  each a pooled rate over the trials that reached the conditioning stage, with a
  tilted Korn–Graubard cluster interval over tasks (analytic: no resamples).
- **Rejection vs recovery** per model: rejection = P(not S2 | S1) (the corrupted value
  was refused or caught), recovery = P(correct | S1); Spearman's rho across models.
- **Fabrication** per model, with the tool-call rate beside it.
- **Interceptor** per model and intercepted arm: paired difference (interceptor arm
  minus its control, pairs = same task and run) in hallucination and wrong-answer
  rate, with a cluster bootstrap percentile interval (``N_RESAMPLES`` resamples of
  tasks) and exact McNemar, the abstention rate beside it, and the unpaired interval
  (MOVER of the arms' tilted Korn–Graubard intervals, traces as clusters) for comparison.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

import stats
from runner.core.constants import CONFIDENCE, INTERVAL_METHOD, N_RESAMPLES
from runner.core.constants import VIEW_SEED as SEED
from runner.core.formatting import pvalue as _p
from runner.core.views import STAGE_SCHEMA, STAGES, Format, ProbeView, ViewColumn

#: the readable names of the intervals these views show, for their captions
_RATE_INTERVAL = stats.INTERVAL_NAMES[INTERVAL_METHOD]
_UNPAIRED_INTERVAL = stats.INTERVAL_NAMES["mover-" + INTERVAL_METHOD]
_PAIRED_INTERVAL = stats.INTERVAL_NAMES["percentile"]

_COLUMNS = ("model", "case_id", "condition", "run", "reached_s1", "reached_s2", "wrong_answer", "correct",
            "hallucinated", "abstained", "fabricated", "tool_called", "fabrication_rules")


def _rows(frame: pl.LazyFrame | pl.DataFrame, probe: str) -> pl.DataFrame:
    lazy = frame.lazy() if isinstance(frame, pl.DataFrame) else frame
    return (lazy.filter((pl.col("probe") == probe) & (pl.col("status") == "ok")).select(_COLUMNS).collect())


def _rate_ci(sub: pl.DataFrame, hit: pl.Expr, given: pl.Expr | None) -> dict[str, Any]:
    """Pooled rate of ``hit`` among rows where ``given`` holds, with its ``INTERVAL_METHOD`` cluster (task) interval."""
    base = sub.filter(given) if given is not None else sub
    if base.height == 0:
        return {"hits": 0, "n": 0, "rate": float("nan"), "lo": float("nan"), "hi": float("nan")}
    cells = base.group_by("case_id", maintain_order=True).agg(hit.cast(pl.Int64).sum().alias("h"), pl.len().alias("n"))
    ci = stats.cluster_rate_ci(cells["case_id"].to_numpy(), cells["h"].to_numpy(), cells["n"].to_numpy(),
                               method=INTERVAL_METHOD, seed=SEED)
    return {"hits": int(cells["h"].sum()), "n": int(cells["n"].sum()), "rate": ci.statistic,
            "lo": ci.confidence_interval.low, "hi": ci.confidence_interval.high}


def hop_rates(rows: pl.DataFrame) -> pl.DataFrame:
    """Per model × injected condition (interceptor arms excluded): stage counts and hop rates with intervals."""
    out = []
    injected = rows.filter((pl.col("condition") != "control") & ~pl.col("condition").str.ends_with("+interceptor")
                           & pl.col("reached_s1").is_not_null())  # imported rows without stages are left out
    s1, s2, s3 = pl.col("reached_s1"), pl.col("reached_s2"), pl.col("wrong_answer")
    groups = list(injected.group_by("model", "condition", maintain_order=True))
    if injected["model"].n_unique() > 1:  # the pooled figure papers quote, beside the per-model ones
        groups += [(("all models", c), sub) for (c,), sub in injected.group_by("condition", maintain_order=True)]
    for (model, condition), sub in groups:
        r23 = _rate_ci(sub, s3, s2)
        r13 = _rate_ci(sub, s3, s1)
        r12 = _rate_ci(sub, s2, s1)
        out.append({"model": model, "condition": condition, "trials": sub.height, "n_s1": int(sub["reached_s1"].sum()),
                    "n_s2": int(sub["reached_s2"].sum()), "n_s3": int(sub.filter(s2 & s3).height),
                    **{f"r23_{k}": v for k, v in r23.items() if k in ("rate", "lo", "hi")},
                    **{f"r13_{k}": v for k, v in r13.items() if k in ("rate", "lo", "hi")},
                    **{f"r12_{k}": v for k, v in r12.items() if k in ("rate", "lo", "hi")}})
    return pl.DataFrame(out)


def rejection_recovery(rows: pl.DataFrame) -> tuple[pl.DataFrame, stats.SpearmanResult | None]:
    """Per model: P(rejected | S1) and P(correct | S1) on injected, non-intercepted arms; Spearman across models."""
    injected = rows.filter((pl.col("condition") != "control") & ~pl.col("condition").str.ends_with("+interceptor")
                           & pl.col("reached_s1").fill_null(False))
    table = (injected.group_by("model", maintain_order=True)
             .agg(pl.len().alias("n_s1"), (~pl.col("reached_s2")).mean().alias("rejection"),
                  pl.col("correct").mean().alias("recovery")))
    rho = None
    if table.height >= 3 and table["rejection"].n_unique() > 1 and table["recovery"].n_unique() > 1:
        rho = stats.spearman(table["rejection"].to_numpy(), table["recovery"].to_numpy(), seed=SEED)
    return table, rho


def fabrication(rows: pl.DataFrame) -> pl.DataFrame:
    """Per model: tool-call rate and fabrication rate (cluster intervals), and which rules fired."""
    out = []
    for (model,), sub in rows.filter(pl.col("tool_called").is_not_null()).group_by("model", maintain_order=True):
        tool = _rate_ci(sub, pl.col("tool_called"), None)
        has_fab = sub["fabricated"].null_count() < sub.height  # imported data may lack the column's inputs
        nan = {"rate": float("nan"), "lo": float("nan"), "hi": float("nan")}
        fab = _rate_ci(sub.filter(pl.col("fabricated").is_not_null()), pl.col("fabricated"), None) if has_fab else nan
        no_tool = sub.filter(~pl.col("tool_called") & pl.col("fabricated").is_not_null())
        rules = no_tool.select(pl.col("fabrication_rules").explode().drop_nulls()).to_series().value_counts(sort=True) \
            if "fabrication_rules" in sub.columns else None
        out.append({"model": model, "trials": sub.height, "tool_rate": tool["rate"], "tool_lo": tool["lo"],
                    "tool_hi": tool["hi"], "fabricated_rate": fab["rate"], "fabricated_lo": fab["lo"],
                    "fabricated_hi": fab["hi"],
                    "fabricated_without_tools": _mean(no_tool["fabricated"]) if no_tool.height else float("nan"),
                    "rules": ", ".join(f"{r[0]} {r[1]}" for r in rules.iter_rows()) if rules is not None else ""})
    return pl.DataFrame(out, schema=_FAB_SCHEMA)


_FAB_SCHEMA = {"model": pl.String, "trials": pl.Int64, "tool_rate": pl.Float64, "tool_lo": pl.Float64,
               "tool_hi": pl.Float64, "fabricated_rate": pl.Float64, "fabricated_lo": pl.Float64,
               "fabricated_hi": pl.Float64, "fabricated_without_tools": pl.Float64, "rules": pl.String}


def _mean(values: pl.Series) -> float:
    """The mean of a boolean or numeric column as a float (NaN when it has no values)."""
    mean = values.cast(pl.Float64).mean()
    return float(mean) if isinstance(mean, int | float) else float("nan")


def interceptor_effect(rows: pl.DataFrame) -> pl.DataFrame:
    """Per model × (intercepted arm, control arm): paired differences with interval and exact McNemar."""
    out = []
    arms = sorted({c for c in rows["condition"].unique().to_list() if c.endswith("+interceptor")})
    for arm in arms:
        control = arm.split("+", 1)[0]
        for (model,), sub in rows.group_by("model", maintain_order=True):
            a = sub.filter(pl.col("condition") == arm)
            b = sub.filter(pl.col("condition") == control)
            pairs = a.join(b, on=["case_id", "run"], suffix="_b", maintain_order="left")
            if pairs.height == 0:
                continue
            row: dict[str, Any] = {"model": model, "arm": arm, "control": control, "pairs": pairs.height,
                                   "abstained": _mean(pairs["abstained"]),
                                   "abstained_control": _mean(pairs["abstained_b"])}
            for outcome in ("hallucinated", "wrong_answer"):
                if pairs[outcome].null_count() or pairs[f"{outcome}_b"].null_count():
                    continue  # an outcome the source did not record: no pairs to compare
                x = pairs[outcome].cast(pl.Int64).to_numpy()
                y = pairs[f"{outcome}_b"].cast(pl.Int64).to_numpy()
                res = stats.paired_difference(x, y, cluster=pairs["case_id"].to_numpy(), n_resamples=N_RESAMPLES,
                                              seed=SEED)
                both = np.concatenate([x, y])
                unpaired = stats.cluster_rate_ci(np.arange(both.size), both, np.ones_like(both),
                                                 arm=np.concatenate([np.ones_like(x), np.zeros_like(y)]),
                                                 method=INTERVAL_METHOD, seed=SEED)
                row.update({f"{outcome}_arm": res.rate_a, f"{outcome}_control": res.rate_b,
                            f"{outcome}_diff": res.statistic, f"{outcome}_lo": res.confidence_interval.low,
                            f"{outcome}_hi": res.confidence_interval.high,
                            f"{outcome}_unpaired_lo": unpaired.confidence_interval.low,
                            f"{outcome}_unpaired_hi": unpaired.confidence_interval.high,
                            f"{outcome}_mcnemar_p": res.mcnemar.pvalue,
                            f"{outcome}_discordant": f"{res.mcnemar.a_only}/{res.mcnemar.b_only}"})
            out.append(row)
    return pl.DataFrame(out)


def stage_order(value: Any, is_int: bool) -> int:
    """The stage a ``stage_reached`` value stands for: the integer, or the first number in a label (0: none)."""
    if value is None:
        return 0
    if is_int:
        return int(value)
    digits = re.findall(r"\d+", str(value))
    return int(digits[0]) if digits else 0


def stage_table(trials: pl.LazyFrame, probe: str) -> pl.DataFrame:
    """Trials reaching each stage per model × condition, from a ``stage_reached`` column.

    An integer column counts trials with stage ≥ s for every s from 1 to the largest seen
    (stage 0 = the injection never entered a call); a string column (e.g. ``S1``..``S3``)
    is ordered by the number in the label, and "reached s" means reached s or later.
    """
    schema = trials.collect_schema()
    if "stage_reached" not in schema.names():
        return pl.DataFrame(schema=STAGE_SCHEMA)
    ok = trials.filter((pl.col("probe") == probe) & (pl.col("status") == "ok"))
    counts = ok.group_by("model", "condition", "stage_reached").len().collect()
    if counts.height == 0:
        return pl.DataFrame(schema=STAGE_SCHEMA)
    totals = ok.group_by("model", "condition").len().collect()
    is_int = schema["stage_reached"].is_integer()

    def order_of(v: Any) -> int:
        return stage_order(v, is_int)

    labels: dict[int, str] = {}
    for v in counts["stage_reached"].to_list():
        o = order_of(v)
        if o > 0:
            labels.setdefault(o, f"S{o}" if is_int else str(v))
    rows = []
    for t in totals.sort("model", "condition").iter_rows(named=True):
        sub = counts.filter((pl.col("model") == t["model"]) & (pl.col("condition") == t["condition"]))
        reached = [(order_of(v), n) for v, n in zip(sub["stage_reached"].to_list(), sub["len"].to_list(), strict=True)]
        for o in sorted(labels):
            rows.append({"model": t["model"], "condition": t["condition"], "stage": labels[o], "order": o,
                         "trials": int(t["len"]), "reached": int(sum(n for s, n in reached if s >= o))})
    return pl.DataFrame(rows, schema=STAGE_SCHEMA)


def _rate(name: str, label: str) -> ViewColumn:
    return ViewColumn(f"{name}_rate", label, Format.RATE, lo=f"{name}_lo", hi=f"{name}_hi")


_HOP_COLUMNS = (ViewColumn("model", "model"), ViewColumn("condition", "condition"),
               ViewColumn("n_s1", "S1", Format.COUNT), ViewColumn("n_s2", "S2", Format.COUNT),
               ViewColumn("n_s3", "S3|S2", Format.COUNT), _rate("r23", "P(S3|S2)"), _rate("r13", "P(S3|S1)"),
               _rate("r12", "P(S2|S1)"))
_REJECTION_COLUMNS = (ViewColumn("model", "model"), ViewColumn("n_s1", "trials at S1", Format.COUNT),
                     ViewColumn("rejection", "rejection", Format.RATE), ViewColumn("recovery", "recovery", Format.RATE))
_FABRICATION_COLUMNS = (ViewColumn("model", "model"), ViewColumn("trials", "trials", Format.COUNT),
                       _rate("tool", "tool-call rate"), _rate("fabricated", "fabricated"),
                       ViewColumn("fabricated_without_tools", "fab. | no tool", Format.RATE),
                       ViewColumn("rules", "rules fired (no-tool trials)"))
_STAGE_COLUMNS = (ViewColumn("model", "model"), ViewColumn("condition", "condition"), ViewColumn("stage", "stage"),
                 ViewColumn("reached", "reached", Format.COUNT), ViewColumn("trials", "of trials", Format.COUNT))


def _interceptor_columns(eff: pl.DataFrame) -> tuple[ViewColumn, ...]:
    cols = [ViewColumn("model", "model"), ViewColumn("arm", "arm"), ViewColumn("pairs", "pairs", Format.COUNT)]
    if "hallucinated_diff" in eff.columns:
        cols += [ViewColumn("hallucinated_control", "halluc. control", Format.RATE),
                 ViewColumn("hallucinated_arm", "halluc. arm", Format.RATE),
                 ViewColumn("hallucinated_diff", "Δ pp [paired CI]", Format.DIFF, lo="hallucinated_lo",
                            hi="hallucinated_hi"),
                 ViewColumn(None, "unpaired CI", Format.DIFF, lo="hallucinated_unpaired_lo",
                            hi="hallucinated_unpaired_hi"),
                 ViewColumn("hallucinated_mcnemar_p", "McNemar p", Format.PVALUE),
                 ViewColumn("hallucinated_discordant", "discordant (arm/control)")]
    if "wrong_answer_diff" in eff.columns:
        cols.append(ViewColumn("wrong_answer_diff", "wrong Δ pp", Format.DIFF, lo="wrong_answer_lo",
                               hi="wrong_answer_hi"))
    cols.append(ViewColumn("abstained", "abstained", Format.RATE))
    return tuple(cols)


def propagation_views(probe: str, frame: pl.LazyFrame | pl.DataFrame, *, seed: int = SEED) -> list[ProbeView]:
    """Hop rates, rejection vs recovery, fabricated tool use, the interceptor's effect and stage reach.

    ``seed`` (the run's) is not used: the intervals keep their fixed seed, so they match the paper anchors.
    """
    rows = _rows(frame, probe)
    if rows.height == 0:
        return []
    views = []
    hops = hop_rates(rows)
    if hops.height:
        views.append(ProbeView(
            "hop_rates", f"{probe} · hop rates",
            "S1: the corrupted value entered a call; S2: executed and not rejected; S3: wrong final answer. Rates "
            f"pooled over trials reaching the conditioning stage; [{CONFIDENCE:.0%} {_RATE_INTERVAL} over tasks "
            "(analytic, no resamples)].", hops, _HOP_COLUMNS))
        rr, rho = rejection_recovery(rows)
        views.append(ProbeView(
            "rejection_recovery", f"{probe} · rejection vs recovery",
            "rejection = P(not S2 | S1); recovery = P(correct final answer | S1). "
            + (f"Spearman rho across models = {rho.statistic:+.3f}, p = {_p(rho.pvalue)} ({rho.method})."
               if rho is not None else "Spearman's rho needs at least 3 models with varying rates."),
            rr, _REJECTION_COLUMNS))
    fab = fabrication(rows)
    if fab.height:
        views.append(ProbeView(
            "fabrication", f"{probe} · fabricated tool use",
            "fabricated: an answer asserting a tool result no tool produced (rules in README, 'Fabricated tool "
            "use'). An agent that rarely calls tools cannot be corrupted by a tool and looks robust to injection "
            f"for that reason alone. [{CONFIDENCE:.0%} {_RATE_INTERVAL} over tasks]", fab, _FABRICATION_COLUMNS))
    eff = interceptor_effect(rows)
    if eff.height:
        views.append(ProbeView(
            "interceptor", f"{probe} · interceptor (arm − its control, paired by task and run)",
            f"Paired difference: {CONFIDENCE:.0%} {_PAIRED_INTERVAL} over tasks with both arms kept together "
            f"({N_RESAMPLES:,} resamples); exact McNemar on discordant pairs (arm-only/control-only). Unpaired CI: "
            f"{_UNPAIRED_INTERVAL}, each trace its own cluster (pairing ignored), for comparison. Abstained: the "
            "interceptor arm's abstention rate — the price of its accuracy.",
            eff, _interceptor_columns(eff)))
    lazy = frame.lazy() if isinstance(frame, pl.DataFrame) else frame
    stages = stage_table(lazy, probe)
    if stages.height:
        views.append(ProbeView(
            STAGES, f"{probe} · stage reach",
            "Ok trials whose injected error reached each stage or a later one (S1 entered a call, S2 executed "
            "unrejected, S3 a wrong final answer).", stages, _STAGE_COLUMNS))
    return views

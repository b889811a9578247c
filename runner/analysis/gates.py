"""Gates on intervals: ``trialgrid report OUT --gate "upper(decoy_called | ungroundable) <= 0.20"``.

Why this exists: a gate on a point rate fails on noise (a rerun moves it by chance); a gate on a
bound of the rate's cluster interval fails only when the evidence says the rate is past the
threshold (``lower(...) > t``) or cannot rule it out (``upper(...) > t`` against a ceiling). A
gate is ``BOUND(RATE [| CONDITION]) OP THRESHOLD``: BOUND is ``upper``, ``lower`` or ``rate``, OP
one of ``<= < >= >``, THRESHOLD a proportion (``0.2``) or a percentage (``20%``). It is checked
for every run × probe × model that reports the rate (and, without a condition, every condition);
each failing row is named in the message.
"""

from __future__ import annotations

import polars as pl

from runner.analysis.leaderboard import Summary
from runner.core.errors import UserError
from runner.core.gates import Gate, parse_gate

__all__ = ["Gate", "check_gates", "parse_gate"]

_COLUMN = {"upper": "cluster_hi", "lower": "cluster_lo", "rate": "value"}


def check_gates(summary: Summary, gates: list[Gate]) -> list[str]:
    """One line per (gate, run, probe, model, condition) that fails; raises ``UserError`` for a gate matching nothing."""
    failures = []
    for gate in gates:
        rows = summary.conditions.filter(pl.col("rate") == gate.rate)
        if gate.condition is not None:
            rows = rows.filter(pl.col("condition") == gate.condition)
        if rows.height == 0:
            known = sorted(set(summary.conditions["rate"].to_list()))
            raise UserError(f"--gate {gate.text!r} matches no rate of these runs",
                            hint=f"rates here: {', '.join(known)}; conditions: "
                                 f"{', '.join(sorted(set(summary.conditions['condition'].to_list())))}")
        for r in rows.iter_rows(named=True):
            value = r[_COLUMN[gate.bound]]
            if value is None or value != value:  # no ok trials: nothing to gate on, never a pass
                failures.append(f"GATE {gate.text}: {r['model']} · {r['probe']} · {r['condition']} has no interval "
                                f"(no scored trials) [{r['run']}]")
            elif not gate.holds(float(value)):
                failures.append(f"GATE {gate.text}: {r['model']} · {r['probe']} · {r['condition']}: {gate.bound} "
                                f"{100 * value:.1f}% (rate {100 * r['value']:.1f}%, 95% interval "
                                f"{100 * r['cluster_lo']:.1f}–{100 * r['cluster_hi']:.1f}%) [{r['run']}]")
    return failures

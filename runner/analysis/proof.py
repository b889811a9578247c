"""Which cases no agent could pass: the oracle's rows read back (``trialgrid validate --oracle``).

The oracle persona answers every case as its key says (``runner/sim/oracle.py``), so a case it fails is
unpassable by construction, and the row says why: the negative probe's ``reasons`` and BFCL's
``bfcl_error``, the misselection probe's credit of the expected tool and the decoy, the phantom probe's
exact match with the gold fields, the propagation probe's correctness (in its uninjected conditions: an
injected error measures an agent's reaction, not whether the task can be done), or the error of a trial that
did not finish.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.output import Output


@dataclass(frozen=True)
class Unpassable:
    probe: str
    case_id: str
    condition: str
    why: str


def unpassable_cases(output: Output, kinds: dict[str, str]) -> tuple[int, list[Unpassable]]:
    """(cells judged, the cells the oracle failed and why); ``kinds`` maps probe name → kind. A propagation
    cell with an injected error is asked but not judged."""
    rows = output.scan().collect()
    out: list[Unpassable] = []
    judged = 0
    for row in rows.sort("probe", "case_id", "condition").iter_rows(named=True):
        kind = kinds.get(row["probe"], "")
        if kind == "propagation" and row.get("injection") is not None:
            continue
        judged += 1
        why = _why(kind, row)
        if why is not None:
            out.append(Unpassable(row["probe"], row["case_id"], row["condition"], why))
    return judged, out


def _why(kind: str, row: dict[str, Any]) -> str | None:
    if row["status"] != "ok":
        return f"the trial ended {row.get('error_kind') or 'in error'}: {row.get('error') or ''}".rstrip(": ")
    if kind == "negative":
        reasons = list(row.get("reasons") or [])
        if row.get("bfcl_passed") is False:
            reasons.append(f"BFCL's checker: {row.get('bfcl_error')}")
        return "; ".join(reasons) if reasons or row.get("passed") is False else None
    if kind == "misselection":
        problems = []
        if not row.get("expected_called"):
            problems.append(f"a call to {row.get('expected_tool')!r} is not credited as the expected tool")
        if row.get("decoy_called"):
            problems.append(f"the expected tool {row.get('expected_tool')!r} is the decoy")
        return "; ".join(problems) or None
    if kind == "propagation":
        problems = []
        if row.get("abstained"):
            problems.append(f"the interceptor abstained: {row.get('abstain_reason')}")
        elif not row.get("correct"):
            problems.append(f"its reference call does not return every `expect` value (the oracle, stating what "
                            f"the results hold, answered {row.get('final_answer')!r})")
        if row.get("fabricated"):
            problems.append(f"it is scored fabricated ({', '.join(row.get('fabrication_rules') or [])})")
        return "; ".join(problems) or None
    if kind == "phantom":
        if row.get("auditor_exact") is False:
            return (f"naming the gold fields {row.get('gold_fields')} did not match them exactly "
                    f"(another trace makes the same request with other gold fields?)")
        return None
    return None


__all__ = ["Unpassable", "unpassable_cases"]

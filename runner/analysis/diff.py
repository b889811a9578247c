"""Case verdicts of pass/fail probes, the ``--fail-on`` gate, and ``trialgrid diff OLD NEW``.

A probe that scores ``passed`` per trial (``negative``) gets one verdict per
(probe, model, case): ``fail`` when any scored trial failed, ``pass`` when every
scored trial passed, ``unscored`` when every trial errored (a gate must not pass on
no evidence, and an error is never counted as a pass or a fail). Failing verdicts
carry their reasons — field and concrete value — so a CI log says what leaked.

``diff`` lines two runs of one sweep up cell by cell — (probe, model, case,
condition), for every probe kind — and compares the count of the cell's *event*
before and after: a failure for a pass/fail probe (headline ``passed``), else a
trial with the probe's headline rate (a decoy call, a wrong answer, a failed
audit). The rule, stated once in ``RULE``:

- REGRESSION: the event's rate rose and the two-sided Fisher exact test on the two
  counts (event / no event, before / after) gives p ≤ ``ALPHA``; or, for a
  pass/fail probe, the cell passed every scored trial before and fails now (the
  ``--fail-on`` gate's own rule, so a gate that passed and now fails is never
  "unchanged");
- FIXED: the mirror image;
- anything else is unchanged, however the counts moved.

Fisher treats trials as independent: within one cell they share a prompt, so
this is the per-cell question "did this cell's rate move", not an inference
about prompts. Runs of different sweeps (another ``sweep_name``, or no cell in
common) are refused unless ``force``: their cells are not the same questions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

import stats
from runner.analysis.cells import cell_counts
from runner.analysis.leaderboard import SUCCESS_RATES
from runner.core.errors import UserError
from runner.core.manifest import Manifest
from runner.output.reader import Output, as_output
from runner.probes import PROBES

#: significance level of the per-cell Fisher exact test
ALPHA = 0.05
RULE = (f"REGRESSION / FIXED: a cell's event rate (a failure for pass/fail probes, else the headline rate) rose / "
        f"fell with two-sided Fisher exact p ≤ {ALPHA:g} on the two counts, or a pass/fail cell went from passing "
        "every scored trial to failing (or back).")

_PASS, FAIL, _UNSCORED = "pass", "fail", "unscored"


@dataclass(frozen=True)
class CaseVerdict:
    probe: str
    model: str
    case_id: str
    verdict: str
    trials: int
    failed: int
    errors: int
    reasons: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.probe, self.model, self.case_id)

    def label(self) -> str:
        return f"{self.case_id} [{self.model}, {self.probe}]"


def _gated_probes(manifest: Manifest) -> dict[str, str]:
    """probe name → kind, for the probes of a run that score ``passed`` per trial."""
    gated = {}
    for name, info in manifest.probes.items():
        cls = PROBES.get(info.kind)
        if cls is not None and {"passed", "reasons"} <= {f.name for f in cls.outcome_fields}:
            gated[name] = info.kind
    return gated


def case_verdicts(output: Output | Path, select: Iterable[str] | None = None) -> list[CaseVerdict]:
    """Verdicts of every pass/fail probe in run ``output`` (or those named / of the kinds in ``select``)."""
    output = as_output(output)
    gated = _gated_probes(output.manifest)
    if select is not None:
        wanted = set(select)
        unknown = wanted - set(gated) - set(gated.values())
        if unknown:
            raise UserError(f"--fail-on {sorted(unknown)[0]!r} names no pass/fail probe of this sweep",
                            hint=f"pass/fail probes here: {', '.join(sorted(gated)) or 'none'} "
                                 f"(a probe name, or a kind such as negative)")
        gated = {n: k for n, k in gated.items() if n in wanted or k in wanted}
    if not gated:
        return []
    ok = pl.col("status") == "ok"
    frame = (
        output.scan()
        .filter(pl.col("probe").is_in(list(gated)))
        .group_by("probe", "model", "case_id")
        .agg(pl.len().alias("trials"),
             (ok & ~pl.col("passed")).sum().alias("failed"),
             (~ok).sum().alias("errors"),
             pl.col("reasons").filter(ok & ~pl.col("passed")).list.explode(keep_nulls=False, empty_as_null=False)
             .unique(maintain_order=True).alias("reasons"))
        .sort("probe", "model", "case_id")
        .collect()
    )
    verdicts = []
    for r in frame.iter_rows(named=True):
        scored = r["trials"] - r["errors"]
        verdict = _UNSCORED if scored == 0 else FAIL if r["failed"] else _PASS
        verdicts.append(CaseVerdict(r["probe"], r["model"], r["case_id"], verdict, r["trials"], r["failed"],
                                    r["errors"], tuple(x for x in (r["reasons"] or []) if x is not None)))
    return verdicts


def _why(v: CaseVerdict, limit: int = 4) -> str:
    if v.verdict == _UNSCORED:
        return f"every one of {v.trials} trial(s) errored; nothing was scored"
    shown = "; ".join(v.reasons[:limit])
    more = f"; +{len(v.reasons) - limit} more" if len(v.reasons) > limit else ""
    return f"{shown}{more} ({v.failed}/{v.trials - v.errors} trials failed)"


def gate_lines(verdicts: list[CaseVerdict]) -> list[str]:
    """One ``FAIL`` / ``_UNSCORED`` line per case that stops the gate."""
    return [f"{v.verdict.upper()} {v.label()}: {_why(v)}" for v in verdicts if v.verdict != _PASS]


@dataclass(frozen=True)
class CellChange:
    """One (probe, model, case, condition) cell in both runs: its event count before and after, and the test."""

    probe: str
    kind: str
    model: str
    case_id: str
    condition: str
    event: str
    before: tuple[int, int]   # (events, scored trials)
    after: tuple[int, int]
    p: float
    status: str               # REGRESSION, FIXED or unchanged
    reasons: tuple[str, ...] = ()

    def label(self) -> str:
        return f"{self.case_id} [{self.model}, {self.probe}, {self.condition}]"

    def line(self) -> str:
        (x0, n0), (x1, n1) = self.before, self.after
        r0 = f"{100 * x0 / n0:.0f}%" if n0 else "—"
        r1 = f"{100 * x1 / n1:.0f}%" if n1 else "—"
        why = f"; {'; '.join(self.reasons[:4])}" + (f"; +{len(self.reasons) - 4} more" if len(self.reasons) > 4 else "") \
            if self.reasons and self.status == "REGRESSION" else ""
        return (f"{self.status} {self.label()}: {self.event} {x0}/{n0} ({r0}) -> {x1}/{n1} ({r1}), "
                f"Fisher p = {self.p:.2g}{why}")


@dataclass
class DiffResult:
    changes: list[CellChange] = field(default_factory=list)
    only_old: list[str] = field(default_factory=list)   # cell labels
    only_new: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[CellChange]:
        return [c for c in self.changes if c.status == "REGRESSION"]

    @property
    def fixed(self) -> list[CellChange]:
        return [c for c in self.changes if c.status == "FIXED"]

    def lines(self, limit: int = 20) -> list[str]:
        """REGRESSION and FIXED lines, then cells in one run only (at most ``limit`` listed), then the tally."""
        out = [c.line() for c in self.regressions] + [c.line() for c in self.fixed]
        for tag, cells in (("ONLY IN OLD", self.only_old), ("ONLY IN NEW", self.only_new)):
            out += [f"{tag} {c}" for c in cells[:limit]]
            if len(cells) > limit:
                out.append(f"{tag}: +{len(cells) - limit} more cell(s)")
        unchanged = len(self.changes) - len(self.regressions) - len(self.fixed)
        out.append(f"{len(self.regressions)} regression(s), {len(self.fixed)} fixed, {unchanged} unchanged, "
                   f"{len(self.only_old)} only in old, {len(self.only_new)} only in new. {RULE}")
        return out


def _probe_rates(manifest: Manifest) -> dict[str, tuple[str, str]]:
    """probe name → (kind, headline rate), for every probe the run recorded (imported ones declare their rates)."""
    out = {}
    for name, info in manifest.probes.items():
        cls = PROBES.get(info.kind)
        rates = cls.rates if cls is not None else tuple(info.rates or ())
        if rates:
            out[name] = (info.kind, rates[0])
    return out


def _cells(output: Output) -> dict[tuple[str, str, str, str], tuple[str, str, int, int]]:
    """(probe, model, case, condition) → (kind, event, events, scored trials) of one run."""
    trials = output.scan()
    result = {}
    for probe, (kind, head) in _probe_rates(output.manifest).items():
        counts = cell_counts(trials, probe, (head,))
        for r in counts.iter_rows(named=True):
            n, hits = r[f"n_{head}"], r[head]
            success = head in SUCCESS_RATES
            event = f"failure (not {head})" if success else head
            result[(probe, r["model"], r["case_id"], r["condition"])] = (kind, event, n - hits if success else hits, n)
    return result


def _reasons(output: Output) -> dict[tuple[str, str, str, str], tuple[str, ...]]:
    """Failure reasons of the failing trials of each cell of the pass/fail probes (field and value)."""
    gated = _gated_probes(output.manifest)
    if not gated:
        return {}
    ok = pl.col("status") == "ok"
    frame = (output.scan().filter(pl.col("probe").is_in(list(gated)) & ok & ~pl.col("passed"))
             .group_by("probe", "model", "case_id", "condition")
             .agg(pl.col("reasons").list.explode(keep_nulls=False, empty_as_null=False).unique(maintain_order=True))
             .collect())
    return {(r["probe"], r["model"], r["case_id"], r["condition"]): tuple(x for x in r["reasons"] or [] if x)
            for r in frame.iter_rows(named=True)}


def _status(before: tuple[int, int], after: tuple[int, int], p: float, pass_fail: bool) -> str:
    (x0, n0), (x1, n1) = before, after
    if not n0 or not n1:
        return "unchanged"
    r0, r1 = x0 / n0, x1 / n1
    if r1 > r0 and (p <= ALPHA or (pass_fail and x0 == 0)):
        return "REGRESSION"
    if r1 < r0 and (p <= ALPHA or (pass_fail and x1 == 0)):
        return "FIXED"
    return "unchanged"


def diff_runs(old_output: Output | Path, new_output: Output | Path, *, force: bool = False) -> DiffResult:
    """Every cell of two runs of one sweep, compared as the module docstring says. Raises ``UserError``."""
    before_run, after_run = as_output(old_output), as_output(new_output)
    old, new = before_run.path, after_run.path
    names = [before_run.manifest.sweep_name, after_run.manifest.sweep_name]
    if names[0] != names[1] and not force:
        raise UserError(f"{old} is sweep {names[0]!r} and {new} is sweep {names[1]!r}: different sweeps ask "
                        "different questions", hint="pass --force to compare them anyway")
    before, after = _cells(before_run), _cells(after_run)
    if not before and not after:
        raise UserError(f"neither {old} nor {new} has trials to compare")
    common = before.keys() & after.keys()
    if not common and not force:
        raise UserError(f"{old} and {new} have no (probe, model, case, condition) cell in common",
                        hint="pass --force to list them anyway")
    reasons = _reasons(after_run)
    result = DiffResult()
    for key in sorted(before.keys() | after.keys()):
        probe, model, case_id, condition = key
        label = f"{case_id} [{model}, {probe}, {condition}]"
        if key not in after:
            result.only_old.append(label)
            continue
        if key not in before:
            result.only_new.append(label)
            continue
        kind, event, x0, n0 = before[key]
        _, _, x1, n1 = after[key]
        p = float(stats.fisher_exact([[x0, n0 - x0], [x1, n1 - x1]]).pvalue) if n0 and n1 else 1.0
        status = _status((x0, n0), (x1, n1), p, event.startswith("failure"))
        result.changes.append(CellChange(probe, kind, model, case_id, condition, event, (x0, n0), (x1, n1), p,
                                         status, reasons.get(key, ())))
    return result

"""Case verdicts of pass/fail probes, the ``--fail-on`` gate, and ``trialgrid diff OLD NEW``.

A probe that scores ``passed`` per trial (``negative``) gets one verdict per
(probe, model, case): ``fail`` when any scored trial failed, ``pass`` when every
scored trial passed, ``unscored`` when every trial errored (a gate must not pass on
no evidence, and an error is never counted as a pass or a fail). Failing verdicts
carry their reasons — field and concrete value — so a CI log says what leaked.

``diff`` lines two runs of one sweep up on the (probe, model, case, condition)
cells both hold, for every probe kind, and compares the count of the cell's
*event* before and after: a failure for a pass/fail probe (headline ``passed``),
else a trial with the probe's headline rate (a decoy call, a wrong answer, a
failed audit). Two levels, one family (the rule, stated once in ``rule()``):

- **run level**, per (probe, model): NEW − OLD of the event rate on the shared
  cases, paired and clustered on the case (``runner.analysis.compare.paired_contrast``:
  the report's A − B interval and the paired cluster permutation p, labels
  OLD / NEW swapped within case), with the smallest change the design could show;
- **case level**, per cell: the two-sided Fisher exact test on the two counts
  (trials of one cell are independent given the case, so this asks whether that
  cell moved).

REGRESSION / FIXED needs evidence under a rule that controls the family-wise
error rate over everything one diff tests: ``ALPHA`` is split, ``RUN_ALPHA`` to
the run-level tests and ``CASE_ALPHA`` to the case-level ones (Bonferroni across
the two families), with Holm within each. A cell whose own evidence does not pass
is at most one to *watch* (its event went from none to some, or back, or its raw Fisher
p ≤ ``ALPHA``): listed with its counts, to read, never a verdict. The former
default, "a pass/fail cell that passed every scored trial now fails", is the
opt-in ``strict`` gate. Runs of different sweeps (another ``sweep_name``, or no
cell in common) are refused unless ``force``: their cells are not the same
questions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

import stats
from runner.analysis.cells import cell_counts
from runner.analysis.compare import PairedContrast, paired_contrast
from runner.analysis.leaderboard import SUCCESS_RATES
from runner.analysis.windows import windows_of
from runner.core.constants import CONFIDENCE
from runner.core.errors import UserError
from runner.core.manifest import Manifest
from runner.output.reader import Output, as_output
from runner.probes import PROBES

#: family-wise error rate of one diff's verdicts, split between the run-level and the case-level family
ALPHA = 0.05
RUN_ALPHA = 0.04
CASE_ALPHA = ALPHA - RUN_ALPHA

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
    p: float                  # two-sided Fisher exact p on the two counts
    status: str               # REGRESSION, FIXED, watch or unchanged
    reasons: tuple[str, ...] = ()
    p_holm: float = 1.0       # Holm-adjusted within the case-level family
    why: str = ""             # which rule gave the status

    def label(self) -> str:
        return f"{self.case_id} [{self.model}, {self.probe}, {self.condition}]"

    def line(self) -> str:
        (x0, n0), (x1, n1) = self.before, self.after
        r0 = f"{100 * x0 / n0:.0f}%" if n0 else "—"
        r1 = f"{100 * x1 / n1:.0f}%" if n1 else "—"
        why = f"; {'; '.join(self.reasons[:4])}" + (f"; +{len(self.reasons) - 4} more" if len(self.reasons) > 4 else "") \
            if self.reasons and self.status in ("REGRESSION", "watch") and x1 > x0 else ""
        tag = "WATCH" if self.status == "watch" else self.status
        rule = f" ({self.why})" if self.why else ""
        return (f"{tag} {self.label()}: {self.event} {x0}/{n0} ({r0}) -> {x1}/{n1} ({r1}), "
                f"Fisher p = {self.p:.2g}, Holm {self.p_holm:.2g}{rule}{why}")


@dataclass(frozen=True)
class RunChange:
    """One (probe, model) in both runs: NEW − OLD of the event rate on the shared cases, paired on the case."""

    probe: str
    kind: str
    model: str
    event: str
    contrast: PairedContrast   # A = NEW, B = OLD
    p_holm: float
    status: str                # REGRESSION, FIXED or unchanged

    def line(self) -> str:
        c = self.contrast
        pp = 100.0
        ci = f"[{pp * c.ci_lo:+.1f}, {pp * c.ci_hi:+.1f}]"
        tag = self.status if self.status != "unchanged" else "same"
        detect = (f"detectable ±{pp * c.detectable:.1f} pp" if c.floor <= RUN_ALPHA else
                  f"no arrangement of these data can pass (floor {c.floor:.2g} > {RUN_ALPHA:g})")
        return (f"{tag} {self.model} · {self.probe} · {self.event}: {pp * c.rate_b:.1f}% -> {pp * c.rate_a:.1f}% "
                f"({pp * c.difference:+.1f} pp, {CONFIDENCE:.0%} CI {ci}), paired p = {c.p:.2g} "
                f"(floor {c.floor:.2g}), Holm {self.p_holm:.2g}; {c.cases} cases; {detect}")


@dataclass
class DiffResult:
    changes: list[CellChange] = field(default_factory=list)
    only_old: list[str] = field(default_factory=list)   # cell labels
    only_new: list[str] = field(default_factory=list)
    runs: list[RunChange] = field(default_factory=list)
    strict: bool = False

    @property
    def regressions(self) -> list[CellChange | RunChange]:
        """Run-level and case-level REGRESSION verdicts (the case level under ``--strict`` too)."""
        return [*(r for r in self.runs if r.status == "REGRESSION"),
                *(c for c in self.changes if c.status == "REGRESSION")]

    def past_bound(self, points: float) -> list[str]:
        """``--max-regression``: one line per run-level change whose interval's lower bound says the event rate
        rose by more than ``points`` percentage points (evidence of a regression that large, not its point)."""
        return [f"GATE regression > {points:g} pp: {r.model} · {r.probe} · {r.event}: NEW − OLD "
                f"{100 * r.contrast.difference:+.1f} pp, {CONFIDENCE:.0%} CI lower bound "
                f"{100 * r.contrast.ci_lo:+.1f} pp" for r in self.runs if 100 * r.contrast.ci_lo > points]

    @property
    def fixed(self) -> list[CellChange | RunChange]:
        return [*(r for r in self.runs if r.status == "FIXED"), *(c for c in self.changes if c.status == "FIXED")]

    @property
    def watch(self) -> list[CellChange]:
        return [c for c in self.changes if c.status == "watch"]

    def lines(self, limit: int = 20) -> list[str]:
        """Run-level lines, case-level verdicts, cells to watch and cells in one run only (each at most ``limit``), tally."""
        out = [r.line() for r in self.runs]
        verdicts = [c for c in self.changes if c.status in ("REGRESSION", "FIXED")]
        verdicts.sort(key=lambda c: c.status != "REGRESSION")
        out += [c.line() for c in verdicts]
        watch = self.watch
        out += [c.line() for c in watch[:limit]]
        if len(watch) > limit:
            out.append(f"WATCH: +{len(watch) - limit} more cell(s)")
        for tag, cells in (("ONLY IN OLD", self.only_old), ("ONLY IN NEW", self.only_new)):
            out += [f"{tag} {c}" for c in cells[:limit]]
            if len(cells) > limit:
                out.append(f"{tag}: +{len(cells) - limit} more cell(s)")
        unchanged = len(self.changes) - len(verdicts) - len(watch)
        out.append(f"{len(self.regressions)} regression(s), {len(self.fixed)} fixed "
                   f"({sum(r.status != 'unchanged' for r in self.runs)} of {len(self.runs)} run-level tests, "
                   f"{len(verdicts)} of {len(self.changes)} cells), {len(watch)} to watch, {unchanged} cells unchanged, "
                   f"{len(self.only_old)} only in old, {len(self.only_new)} only in new. "
                   f"{rule(len(self.runs), len(self.changes), self.strict)}")
        return out


def rule(run_tests: int, cell_tests: int, strict: bool = False) -> str:
    """The controlled rule of one diff, as its output states it."""
    text = (f"Rule: REGRESSION / FIXED when the event rate (a failure for pass/fail probes, else the headline rate) "
            f"rose / fell with Holm-adjusted p ≤ {RUN_ALPHA:g} across the {run_tests} run-level paired tests "
            f"(NEW − OLD per probe × model, paired cluster permutation, cases as the unit) or ≤ {CASE_ALPHA:g} "
            f"across the {cell_tests} case-level Fisher tests: family-wise error rate ≤ {ALPHA:g} over everything "
            f"this diff tests. WATCH: a cell whose event went from none to some (or back) or whose raw Fisher p ≤ "
            f"{ALPHA:g}, not a verdict.")
    if strict:
        text += " --strict: a pass/fail cell that passed every scored trial and now fails is a REGRESSION too."
    return text


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
    windows = windows_of(output, trials)  # one window of rows at a time (runner.analysis.windows)
    result = {}
    for probe, (kind, head) in _probe_rates(output.manifest).items():
        counts = cell_counts(trials, probe, (head,), windows)
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


def _cell_status(before: tuple[int, int], after: tuple[int, int], p: float, p_holm: float, pass_fail: bool,
                 strict: bool) -> tuple[str, str]:
    """(status, the rule that gave it) of one cell."""
    (x0, n0), (x1, n1) = before, after
    if not n0 or not n1:
        return "unchanged", ""
    r0, r1 = x0 / n0, x1 / n1
    if r1 != r0 and p_holm <= CASE_ALPHA:
        return ("REGRESSION" if r1 > r0 else "FIXED"), f"case-level Holm ≤ {CASE_ALPHA:g}"
    if strict and pass_fail and ((x0 == 0) != (x1 == 0)):
        return ("REGRESSION" if x1 else "FIXED"), "--strict: " + ("passed every trial, now fails" if x1 else
                                                                 "failed, now passes every trial")
    if r1 != r0 and ((x0 == 0) != (x1 == 0) or p <= ALPHA):
        return "watch", ""
    return "unchanged", ""


def diff_runs(old_output: Output | Path, new_output: Output | Path, *, force: bool = False,
              strict: bool = False) -> DiffResult:
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
    result = DiffResult(strict=strict)
    shared: dict[tuple[str, str], list[tuple[str, int, int, int, int]]] = {}
    cells: list[tuple[tuple[str, str, str, str], str, str, int, int, int, int, float]] = []
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
        cells.append((key, kind, event, x0, n0, x1, n1, p))
        if n0 and n1:
            shared.setdefault((probe, model), []).append((case_id, x1, n1, x0, n0))
    tested = [c for c in cells if c[4] and c[6]]
    holm_cells = dict(zip([c[0] for c in tested], stats.holm([c[7] for c in tested]), strict=True)) if tested else {}
    for key, kind, event, x0, n0, x1, n1, p in cells:
        q = float(holm_cells.get(key, 1.0))
        status, why = _cell_status((x0, n0), (x1, n1), p, q, event.startswith("failure"), strict)
        result.changes.append(CellChange(key[0], kind, key[1], key[2], key[3], event, (x0, n0), (x1, n1), p,
                                         status, reasons.get(key, ()), q, why))
    seed = before_run.manifest.seed % (2**32)
    family = max(len(shared), 1)
    contrasts = []
    for (probe, model), rows in shared.items():
        case, ha, na, hb, nb = (np.array(col) for col in zip(*rows, strict=True))
        contrasts.append(((probe, model), paired_contrast(case, ha, na, hb, nb, family_level=RUN_ALPHA / family,
                                                          seed=seed)))
    adjusted = stats.holm([c.p for _, c in contrasts]) if contrasts else np.zeros(0)
    kinds = {(k[0], k[1]): (kind, event) for k, kind, event, *_ in cells}
    for ((probe, model), c), q in zip(contrasts, adjusted, strict=True):
        status = "unchanged"
        if q <= RUN_ALPHA and c.difference != 0:
            status = "REGRESSION" if c.difference > 0 else "FIXED"
        kind, event = kinds[(probe, model)]
        result.runs.append(RunChange(probe, kind, model, event, c, float(q), status))
    return result

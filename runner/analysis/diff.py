"""Case verdicts of pass/fail probes, the ``--fail-on`` gate, and ``trialgrid diff OLD NEW``.

A probe that scores ``passed`` per trial (``negative``) gets one verdict per
(probe, model, case): ``fail`` when any scored trial failed, ``pass`` when every
scored trial passed, ``unscored`` when every trial errored (a gate must not pass on
no evidence, and an error is never counted as a pass or a fail). Failing verdicts
carry their reasons — field and concrete value — so a CI log says what leaked.

``diff`` lines two runs up case by case: passed before and fails now is a
REGRESSION (exit 1), failed before and passes now is FIXED.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from runner.core.errors import UserError
from runner.core.manifest import Manifest, read_manifest
from runner.probes import PROBES

PASS, FAIL, UNSCORED = "pass", "fail", "unscored"


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


def _gated_probes(manifest: Manifest, out: Path) -> dict[str, str]:
    """probe name → kind, for the probes of a run that score ``passed`` per trial."""
    gated = {}
    for name, info in manifest.probes.items():
        cls = PROBES.get(info.kind)
        if cls is not None and {"passed", "reasons"} <= {f.name for f in cls.outcome_fields}:
            gated[name] = info.kind
    return gated


def case_verdicts(out: Path, select: Iterable[str] | None = None) -> list[CaseVerdict]:
    """Verdicts of every pass/fail probe in run ``out`` (or those named / of the kinds in ``select``)."""
    manifest = read_manifest(out)
    if manifest is None:
        raise UserError(f"{out} has no manifest.json; is it a trialgrid output directory?")
    gated = _gated_probes(manifest, out)
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
    parts = sorted((out / "trials").glob("*.arrow"))
    if not parts:
        raise UserError(f"no finished trial files in {out / 'trials'}")
    ok = pl.col("status") == "ok"
    frame = (
        pl.scan_ipc([str(p) for p in parts])
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
        verdict = UNSCORED if scored == 0 else FAIL if r["failed"] else PASS
        verdicts.append(CaseVerdict(r["probe"], r["model"], r["case_id"], verdict, r["trials"], r["failed"],
                                    r["errors"], tuple(x for x in (r["reasons"] or []) if x is not None)))
    return verdicts


def _why(v: CaseVerdict, limit: int = 4) -> str:
    if v.verdict == UNSCORED:
        return f"every one of {v.trials} trial(s) errored; nothing was scored"
    shown = "; ".join(v.reasons[:limit])
    more = f"; +{len(v.reasons) - limit} more" if len(v.reasons) > limit else ""
    return f"{shown}{more} ({v.failed}/{v.trials - v.errors} trials failed)"


def gate_lines(verdicts: list[CaseVerdict]) -> list[str]:
    """One ``FAIL`` / ``UNSCORED`` line per case that stops the gate."""
    return [f"{v.verdict.upper()} {v.label()}: {_why(v)}" for v in verdicts if v.verdict != PASS]


@dataclass
class DiffResult:
    regressions: list[tuple[CaseVerdict, CaseVerdict]] = field(default_factory=list)
    fixed: list[tuple[CaseVerdict, CaseVerdict]] = field(default_factory=list)
    unchanged: int = 0
    only_old: list[CaseVerdict] = field(default_factory=list)
    only_new: list[CaseVerdict] = field(default_factory=list)
    other: list[tuple[CaseVerdict, CaseVerdict]] = field(default_factory=list)  # to/from unscored

    def lines(self) -> list[str]:
        out = [f"REGRESSION {new.label()}: {_why(new)}" for _, new in self.regressions]
        out += [f"FIXED {new.label()}" for _, new in self.fixed]
        out += [f"CHANGED {new.label()}: {old.verdict} -> {new.verdict}" for old, new in self.other]
        out += [f"ONLY IN OLD {v.label()}" for v in self.only_old]
        out += [f"ONLY IN NEW {v.label()}" for v in self.only_new]
        out.append(f"{len(self.regressions)} regression(s), {len(self.fixed)} fixed, {self.unchanged} unchanged, "
                   f"{len(self.other)} to/from unscored, {len(self.only_old)} only in old, {len(self.only_new)} only in new")
        return out


def diff_runs(old: Path, new: Path) -> DiffResult:
    before = {v.key: v for v in case_verdicts(old)}
    after = {v.key: v for v in case_verdicts(new)}
    if not before and not after:
        raise UserError(f"neither {old} nor {new} has a pass/fail probe (such as negative) to compare")
    result = DiffResult()
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if a is None:
            result.only_new.append(b)  # type: ignore[arg-type]
        elif b is None:
            result.only_old.append(a)
        elif a.verdict == b.verdict:
            result.unchanged += 1
        elif a.verdict == PASS and b.verdict == FAIL:
            result.regressions.append((a, b))
        elif a.verdict == FAIL and b.verdict == PASS:
            result.fixed.append((a, b))
        else:
            result.other.append((a, b))
    return result

"""`trialgrid diff`: cell-by-cell counts with a Fisher exact test, for every probe kind, and refusal of unrelated runs."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import stats
from runner.analysis.diff import diff_runs
from runner.cli.app import app
from runner.core.errors import UserError
from runner.core.manifest import FORMAT_VERSION, Manifest, ProbeRecord, write_manifest


def _run(out: Path, sweep: str, kind: str, cells: dict[tuple[str, str], tuple[int, int]]) -> Path:
    """A minimal run directory: (case, condition) → (trials with the headline true, trials)."""
    head = {"negative": "passed", "misselection": "decoy_called"}[kind]
    rows = []
    for (case, condition), (hits, n) in cells.items():
        for i in range(n):
            rows.append({"probe": kind, "model": "m", "case_id": case, "condition": condition, "status": "ok",
                         head: i < hits, "reasons": [] if (kind != "negative" or i < hits) else ["leaked x=1"]})
    (out / "trials").mkdir(parents=True)
    pl.DataFrame(rows).write_ipc(out / "trials" / "part-00000.arrow")
    write_manifest(out, Manifest(format_version=FORMAT_VERSION, sweep_name=sweep, sweep_id=sweep,
                                 probes={kind: ProbeRecord(kind=kind)}, status="complete"))
    return out


def test_a_case_dropping_from_7_of_10_to_0_of_10_passing_is_a_regression_with_its_p(tmp_path: Path) -> None:
    old = _run(tmp_path / "old", "s", "negative", {("c1", "negative"): (7, 10), ("c2", "negative"): (5, 10)})
    new = _run(tmp_path / "new", "s", "negative", {("c1", "negative"): (0, 10), ("c2", "negative"): (6, 10)})
    result = diff_runs(old, new)
    (reg,) = result.regressions
    assert (reg.case_id, reg.before, reg.after) == ("c1", (3, 10), (10, 10))
    assert reg.p == pytest.approx(stats.fisher_exact([[3, 7], [10, 0]]).pvalue) and reg.p < 0.01
    line = next(ln for ln in result.lines() if ln.startswith("REGRESSION c1"))
    assert "3/10" in line and "10/10" in line and "p = 0.0031" in line and "leaked x=1" in line
    assert not result.fixed and "1 regression(s), 0 fixed, 1 unchanged" in result.lines()[-1]
    cli = CliRunner()
    assert cli.invoke(app, ["diff", str(old), str(new)]).exit_code == 1
    assert cli.invoke(app, ["diff", str(new), str(old)]).exit_code == 0  # the same change read backwards: FIXED


def test_rate_probes_are_compared_too_in_both_directions(tmp_path: Path) -> None:
    old = _run(tmp_path / "old", "s", "misselection", {("t1", "ungroundable"): (1, 20), ("t2", "ungroundable"): (15, 20)})
    new = _run(tmp_path / "new", "s", "misselection", {("t1", "ungroundable"): (12, 20), ("t2", "ungroundable"): (2, 20)})
    result = diff_runs(old, new)
    assert [c.case_id for c in result.regressions] == ["t1"] and [c.case_id for c in result.fixed] == ["t2"]
    assert result.regressions[0].event == "decoy_called"


def test_unrelated_runs_are_refused_unless_forced(tmp_path: Path) -> None:
    old = _run(tmp_path / "old", "a", "negative", {("c1", "negative"): (7, 10)})
    other = _run(tmp_path / "other", "b", "negative", {("c1", "negative"): (7, 10)})
    disjoint = _run(tmp_path / "disjoint", "a", "negative", {("zz", "negative"): (7, 10)})
    for new in (other, disjoint):
        with pytest.raises(UserError):
            diff_runs(old, new)
        assert CliRunner().invoke(app, ["diff", str(old), str(new)]).exit_code == 2
    forced = diff_runs(old, disjoint, force=True)
    assert forced.only_old and forced.only_new and not forced.regressions

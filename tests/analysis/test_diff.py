"""`trialgrid diff`: run-level paired tests and case-level Fisher tests under one family-wise rule, for every probe
kind; cells to watch that are not verdicts; the opt-in --strict gate; refusal of unrelated runs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import stats
from runner.analysis.diff import diff_runs
from runner.cli.app import app
from runner.core.errors import UserError
from runner.core.manifest import FORMAT_VERSION, Manifest, ProbeRecord, write_manifest
from tests.helpers.rows import write_part


def _run(out: Path, sweep: str, kind: str, cells: dict[tuple[str, str], tuple[int, int]]) -> Path:
    """A minimal run directory: (case, condition) → (trials with the headline true, trials)."""
    head = {"negative": "passed", "misselection": "decoy_called"}[kind]
    rows = []
    for (case, condition), (hits, n) in cells.items():
        for i in range(n):
            rows.append({"probe": kind, "model": "m", "case_id": case, "condition": condition, "status": "ok",
                         head: i < hits, "reasons": [] if (kind != "negative" or i < hits) else ["leaked x=1"]})
    (out / "trials").mkdir(parents=True)
    write_part(out / "trials" / "part-00000.arrow", pl.DataFrame(rows).to_arrow())
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
    assert not result.fixed and "1 regression(s), 0 fixed" in result.lines()[-1] and "Holm" in result.lines()[-1]
    assert reg.p_holm == pytest.approx(2 * reg.p) and reg.why.startswith("case-level Holm")
    # two cases cannot carry a run-level verdict: 4 swaps, floor 1/2, and the line says so
    (run,) = result.runs
    assert run.status == "unchanged" and run.contrast.floor == pytest.approx(0.5)
    assert "no arrangement of these data can pass (floor 0.5" in result.lines()[0]
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


def _many(n_cases: int, hits: int, n: int, condition: str = "negative") -> dict[tuple[str, str], tuple[int, int]]:
    return {(f"c{i:02d}", condition): (hits, n) for i in range(n_cases)}


def test_a_cell_from_10_of_10_to_9_of_10_is_a_lead_not_a_regression_unless_strict(tmp_path: Path) -> None:
    cells = _many(5, 10, 10)
    old = _run(tmp_path / "old", "s", "negative", cells)
    new = _run(tmp_path / "new", "s", "negative", {**cells, ("c00", "negative"): (9, 10)})
    result = diff_runs(old, new)
    assert not result.regressions and [c.case_id for c in result.watch] == ["c00"]
    watch = next(ln for ln in result.lines() if ln.startswith("WATCH"))
    assert "0/10 (0%) -> 1/10 (10%)" in watch and "leaked x=1" in watch
    cli = CliRunner()
    assert cli.invoke(app, ["diff", str(old), str(new)]).exit_code == 0
    strict = diff_runs(old, new, strict=True)
    (reg,) = strict.regressions
    assert reg.case_id == "c00" and "--strict" in reg.why and "--strict" in strict.lines()[-1]
    assert cli.invoke(app, ["diff", str(old), str(new), "--strict"]).exit_code == 1
    assert cli.invoke(app, ["diff", str(old), str(new), "--strict", "--fail-on", "never"]).exit_code == 0


def test_a_shift_over_many_cases_is_a_run_level_regression_with_the_paired_test_and_interval(tmp_path: Path) -> None:
    # 12 cases, each 1/6 decoy calls before and 3/6 after: no single cell passes its Holm share, the run does
    old = _run(tmp_path / "old", "s", "misselection", _many(12, 1, 6, "ungroundable"))
    new = _run(tmp_path / "new", "s", "misselection", _many(12, 3, 6, "ungroundable"))
    result = diff_runs(old, new)
    assert not [c for c in result.changes if c.status == "REGRESSION"]
    (run,) = result.regressions
    cases = np.array([f"c{i:02d}" for i in range(12)])
    x1, x0, six = np.full(12, 3), np.full(12, 1), np.full(12, 6)
    test = stats.paired_permutation_test(cases, x1, six, x0, six)
    ci = stats.cluster_rate_ci(np.concatenate([cases, cases]), np.concatenate([x1, x0]), np.concatenate([six, six]),
                               arm=np.repeat([1, 0], 12))
    c = run.contrast
    assert c.difference == pytest.approx(3 / 6 - 1 / 6) and c.p == test.pvalue
    assert (c.ci_lo, c.ci_hi) == tuple(ci.confidence_interval) and c.cases == 12
    assert c.p == pytest.approx(2 / 2**12)  # every case moved the same way: the two extreme swaps
    line = result.lines()[0]
    assert line.startswith("REGRESSION m · misselection · decoy_called: 16.7% -> 50.0% (+33.3 pp")
    assert "detectable ±" in line and "paired p = 0.00049" in line
    assert CliRunner().invoke(app, ["diff", str(old), str(new)]).exit_code == 1
    assert CliRunner().invoke(app, ["diff", str(new), str(old)]).exit_code == 0  # the same change backwards: FIXED
    assert diff_runs(new, old).fixed[0].status == "FIXED"


def test_many_cells_each_at_raw_p_below_005_give_no_verdict_under_the_family_rule(tmp_path: Path) -> None:
    # three cells at 0/10 → 5/10 (Fisher p 0.033 each) among six: Holm 6 × 0.033, so cells to watch, not verdicts
    old = _run(tmp_path / "old", "s", "misselection", {**_many(3, 0, 10, "a"), **_many(3, 1, 10, "b")})
    new = _run(tmp_path / "new", "s", "misselection", {**_many(3, 5, 10, "a"), **_many(3, 1, 10, "b")})
    result = diff_runs(old, new)
    raw = stats.fisher_exact([[0, 10], [5, 5]]).pvalue
    moved = [c for c in result.changes if c.p == raw]
    assert raw < 0.05 and len(moved) == 3 and all(c.p_holm == pytest.approx(6 * raw) for c in moved)
    assert not [c for c in result.changes if c.status == "REGRESSION"]
    assert len(result.watch) == 3


def test_max_regression_gates_on_the_intervals_lower_bound_not_on_the_point(tmp_path: Path) -> None:
    # +33.3 pp over 12 cases; the interval's lower bound decides: above 2 pp fails, above 60 pp cannot
    old = _run(tmp_path / "old", "s", "misselection", _many(12, 1, 6, "ungroundable"))
    new = _run(tmp_path / "new", "s", "misselection", _many(12, 3, 6, "ungroundable"))
    lo = 100 * diff_runs(old, new).runs[0].contrast.ci_lo
    assert 2 < lo < 33.3
    cli = CliRunner()
    low = cli.invoke(app, ["diff", str(old), str(new), "--max-regression", "2"])
    assert low.exit_code == 1 and "GATE regression > 2 pp: m · misselection · decoy_called" in low.output
    assert f"lower bound {lo:+.1f} pp" in low.output
    high = cli.invoke(app, ["diff", str(old), str(new), "--max-regression", f"{lo + 0.5:.1f}", "--fail-on", "never"])
    assert high.exit_code == 0 and "GATE" not in high.output
    # the same data backwards is a fix: no regression bound is passed, whatever PP
    assert cli.invoke(app, ["diff", str(new), str(old), "--max-regression", "0"]).exit_code == 0


def test_diff_fits_the_terminal_it_is_given(tmp_path: Path) -> None:
    """At COLUMNS=80 no line of diff is over 80 characters; through a pipe each line stays whole."""
    from tests.helpers.cli import invoke, trialgrid
    from tests.helpers.files import quickstart_sweep

    outs = []
    for seed in (1, 2):
        sweep = quickstart_sweep(tmp_path, runs=2, name=f"s{seed}.yaml", seed=seed)
        outs.append(tmp_path / f"out{seed}")
        assert invoke("run", str(sweep), "--out", str(outs[-1]), "-q").exit_code == 0
    wide = trialgrid("diff", str(outs[0]), str(outs[1]), "--force", "--fail-on", "never",
                     env={**os.environ, "COLUMNS": "80"})
    assert wide.returncode == 0, wide.stderr
    lines = wide.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, max(lines, key=len)
    piped = trialgrid("diff", str(outs[0]), str(outs[1]), "--force", "--fail-on", "never")
    assert max(len(line) for line in piped.stdout.splitlines()) > 80  # a log keeps each line whole

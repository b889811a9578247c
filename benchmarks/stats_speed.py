"""Speed of trialgrid's statistics core beside the `ungrounded` package and scipy.

Usage: python benchmarks/stats_speed.py [--quick] [--only SECTION[,SECTION]]

--only runs the named sections (function names, e.g. big_report_section).

Same inputs for every implementation: k prompts x 3 conditions x 20 trials
(two conditions in arm A, one in arm B), at k = 12 and k = 1,000. Prints
wall-clock seconds and ratios (the machine is shared; ratios are the figure
to read). `ungrounded` is a benchmark-only comparison (pip install
ungrounded), not a project dependency; its column is skipped if it is absent.
--quick times `ungrounded` at a tenth of the draws and scales linearly
(its cost is exactly linear in draws), labelled as extrapolated, and runs the
10 M-trial report at a tenth of the prompts (1 M trials).

Sections are functions taking the shared context; main() runs them in order,
so further sections (e.g. an end-to-end report timing) can be appended to
SECTIONS.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

import stats  # noqa: E402

try:
    import ungrounded.stats as ung
except ImportError:  # benchmark-only comparison
    ung = None

try:
    import scipy.stats as sps
except ImportError:
    sps = None

PERM_DRAWS = 20_000
BOOT_DRAWS = 4_000
CONDITIONS = ("ungroundable", "groundable_unknown", "groundable_known")


@dataclass
class Design:
    """One synthetic design held in both input shapes."""

    k: int
    runs: int
    trials: np.ndarray  # (k, 3, runs) 0/1 outcomes
    cluster: np.ndarray = field(init=False)
    arm: np.ndarray = field(init=False)
    hits: np.ndarray = field(init=False)
    n: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.cluster = np.repeat(np.arange(self.k), 3)
        self.arm = np.tile([1, 1, 0], self.k)
        self.hits = self.trials.sum(axis=2).ravel()
        self.n = np.full(3 * self.k, self.runs)

    def ungrounded_clusters(self) -> dict:
        return {
            f"p{i}": {c: self.trials[i, j].tolist() for j, c in enumerate(CONDITIONS)} for i in range(self.k)
        }

    def arm_a_by_cluster(self) -> list[list[int]]:
        return [self.trials[i, :2].ravel().tolist() for i in range(self.k)]


def make_design(k: int, runs: int = 20, seed: int = 7) -> Design:
    rng = np.random.default_rng(seed)
    base = 1 / (1 + np.exp(-rng.normal(-2.2, 1.0, k)))  # heterogeneous prompt rates
    rate = np.stack([base * 1.8, base * 1.4, base * 0.6], axis=1).clip(0, 1)
    return Design(k, runs, (rng.random((k, 3, runs)) < rate[:, :, None]).astype(np.int64))


def timed(fn: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def row(label: str, seconds: float | None, result: str, ref: float | None = None) -> None:
    if seconds is None:
        print(f"  {label:<58} {'—':>10}   {result}")
        return
    ratio = f"{ref / seconds:9.0f}x" if ref else ""
    print(f"  {label:<58} {seconds:9.4f}s {ratio:>10}   {result}")


def permutation_section(ctx: dict) -> None:
    print(f"\n== cluster permutation test, {PERM_DRAWS:,} draws (ratio = ungrounded time / ours) ==")
    for d in ctx["designs"]:
        print(f" {d.k} prompts x 3 conditions x {d.runs} trials = {d.trials.size:,} trials")
        ref = None
        if ung is not None:
            clusters = d.ungrounded_clusters()
            reps = PERM_DRAWS // 10 if ctx["quick"] else PERM_DRAWS
            sec, (diff, p, _) = timed(lambda: ung.cluster_permutation(clusters, CONDITIONS[:2], CONDITIONS[2:], reps=reps, seed=17))
            ref = sec * PERM_DRAWS / reps
            note = f" (timed at {reps:,} draws, scaled x{PERM_DRAWS // reps})" if reps != PERM_DRAWS else ""
            row("ungrounded.cluster_permutation (cell-level MC)" + note, ref, f"diff {diff:.3f} pp, p {p:.4g}")
        else:
            row("ungrounded: not importable, column skipped", None, "pip install ungrounded to compare")
        row("scipy: no within-cluster permutation test", None, "permutation_test has no strata; no equivalent")
        args = (d.cluster, d.arm, d.hits, d.n)
        cases = [
            ("ours, cell level, Monte Carlo (same test as ungrounded)", dict(level="cell", n_resamples=PERM_DRAWS, seed=1)),
            ("ours, cell level, exact", dict(level="cell")),
            ("ours, trial level, Monte Carlo", dict(level="trial", n_resamples=PERM_DRAWS, seed=1)),
            ("ours, trial level, exact (convolution)", dict(level="trial")),
        ]
        for label, kw in cases:
            sec, res = timed(lambda: stats.cluster_permutation_test(*args, **kw), repeat=3)
            extra = f" ± {res.mc_stderr:.1g}" if res.mc_stderr else ""
            row(label, sec, f"diff {100 * res.statistic:.3f} pp, p {res.pvalue:.4g}{extra}, floor {res.attainable_floor:.2g}", ref)


def bootstrap_section(ctx: dict) -> None:
    print(f"\n== cluster bootstrap of the arm-A pooled rate, {BOOT_DRAWS:,} resamples (ratio = ungrounded time / ours) ==")
    for d in ctx["designs"]:
        print(f" {d.k} prompts x 3 conditions x {d.runs} trials")
        ref = None
        if ung is not None:
            groups = d.arm_a_by_cluster()
            sec, (lo, hi) = timed(lambda: ung.cluster_bootstrap_ci(groups, reps=BOOT_DRAWS, seed=17))
            ref = sec
            row("ungrounded.cluster_bootstrap_ci", sec, f"[{lo / 100:.4f}, {hi / 100:.4f}]")
        else:
            row("ungrounded: not importable, column skipped", None, "pip install ungrounded to compare")
        a = d.arm == 1
        h, n, cl = d.hits[a], d.n[a], d.cluster[a]
        hk = np.bincount(cl, h, d.k)
        nk = np.bincount(cl, n, d.k)
        if sps is not None:
            sec, res = timed(lambda: sps.bootstrap(
                (hk, nk), lambda x, y, axis=-1: x.sum(axis) / y.sum(axis), paired=True, vectorized=True,
                n_resamples=BOOT_DRAWS, method="percentile", rng=np.random.default_rng(1)))
            row("scipy.stats.bootstrap (paired over clusters, percentile)", sec,
                f"[{res.confidence_interval.low:.4f}, {res.confidence_interval.high:.4f}]", ref)
        def ci(r) -> str:
            return f"[{r.confidence_interval.low:.4f}, {r.confidence_interval.high:.4f}]"

        sec_p, res = timed(lambda: stats.cluster_rate_ci(cl, h, n, n_resamples=BOOT_DRAWS, seed=1,
                                                         method="percentile"), repeat=3)
        row("ours, cluster_rate_ci, method='percentile'", sec_p, ci(res), ref)
        sec, res = timed(lambda: stats.cluster_rate_ci(cl, h, n, n_resamples=BOOT_DRAWS, seed=1), repeat=3)
        row(f"ours, cluster_rate_ci, default ({res.interval_method})", sec,
            f"{ci(res)}  percentile / default time = {sec_p / sec:.2f}", ref)
        sec_p, res = timed(lambda: stats.cluster_rate_ci(d.cluster, d.hits, d.n, arm=d.arm, n_resamples=BOOT_DRAWS,
                                                         seed=1, method="percentile"), repeat=3)
        row("ours, cluster_rate_ci of A − B, 'percentile'", sec_p, ci(res), ref)
        sec, res = timed(lambda: stats.cluster_rate_ci(d.cluster, d.hits, d.n, arm=d.arm, n_resamples=BOOT_DRAWS,
                                                       seed=1), repeat=3)
        row(f"ours, cluster_rate_ci of A − B, default ({res.interval_method})", sec,
            f"{ci(res)}  percentile / default time = {sec_p / sec:.2f}", ref)


BIG_PROMPTS, BIG_RUNS = 100_000, 20
BIG_CONDITIONS = ("ungroundable", "groundable_unknown", "groundable_known",
                  "ungroundable_paraphrase", "groundable_known_paraphrase")
BIG_ERROR_RATE = 0.001


def write_big_run(out: Path, prompts: int = BIG_PROMPTS, runs: int = BIG_RUNS, seed: int = 20261129) -> int:
    """A synthetic misselection run in trialgrid's output layout, written with pyarrow directly.

    prompts × 5 conditions × runs trials; prompt-level heterogeneity (each prompt has its own
    base rate on the logit scale, shifted per condition); 0.1% of trials have status "error"
    (outcomes null), as a real run would. Returns the number of trials.
    """
    import json

    import pyarrow as pa
    import pyarrow.ipc as ipc

    rng = np.random.default_rng(seed)
    c = len(BIG_CONDITIONS)
    total = prompts * c * runs

    def logistic(x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-x))

    decoy = (logistic(rng.normal(-2.2, 1.0, prompts))[:, None] * np.array([1.8, 1.4, 0.6, 1.7, 0.65])).clip(0, 1)
    expected = logistic(rng.normal(1.0, 1.0, prompts)[:, None] + np.array([-1.0, -0.5, 0.8, -0.9, 0.7]))
    asked = (logistic(rng.normal(-3.0, 1.0, prompts))[:, None] * np.array([2.0, 1.5, 0.3, 1.9, 0.3])).clip(0, 1)
    error = rng.random(total) < BIG_ERROR_RATE

    def outcome(p: np.ndarray) -> pa.Array:
        return pa.array(rng.random(total) < np.repeat(p.ravel(), runs), mask=error)

    def strings(indices: np.ndarray, values: list[str]) -> pa.Array:
        return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), pa.array(values)).cast(pa.string())

    table = pa.table({
        "model": strings(np.zeros(total, np.int32), ["sim-10m"]),
        "probe": strings(np.zeros(total, np.int32), ["misselection"]),
        "case_id": strings(np.repeat(np.arange(prompts), c * runs), [f"t{i:06d}" for i in range(prompts)]),
        "condition": strings(np.tile(np.repeat(np.arange(c), runs), prompts), list(BIG_CONDITIONS)),
        "run": pa.array(np.tile(np.arange(runs, dtype=np.int32), prompts * c)),
        "status": strings(error.astype(np.int32), ["ok", "error"]),
        "input_tokens": pa.array(rng.integers(300, 400, total)),
        "output_tokens": pa.array(rng.integers(10, 60, total)),
        "decoy_called": outcome(decoy),
        "expected_called": outcome(expected),
        "asked": outcome(asked),
        # the reply columns every misselection run has, at rates a careful real model shows
        **{name: outcome(np.full((prompts, c), rate)) for name, rate in
           (("empty_reply", 0.005), ("unparsable_call", 0.01), ("unknown_tool", 0.002), ("calls_from_text", 0.0))},
    })
    (out / "trials").mkdir(parents=True)
    parts = 10
    step = -(-total // parts)
    for i in range(parts):
        with ipc.new_file(str(out / "trials" / f"part-{i:05d}.arrow"), table.schema) as w:
            w.write_table(table.slice(i * step, step), max_chunksize=1 << 20)
    (out / "manifest.json").write_text(json.dumps({
        "format_version": 2, "sweep_name": "synthetic-10M", "sweep_id": "synthetic", "status": "finished",
        "seed": seed, "trials_total": total, "counts": {"ok": int(total - error.sum()), "error": int(error.sum())},
        "probes": {"misselection": {"kind": "misselection"}},
        "sweep": {"models": [{"name": "sim-10m", "provider": "sim", "model": "sim-10m"}], "seed": seed},
    }))
    return total


def big_report_section(ctx: dict) -> None:
    """10,000,000 trials on disk → polars aggregation → the full report, timed end to end."""
    import io
    import shutil
    import subprocess
    import tempfile

    import polars as pl
    from rich.console import Console

    from runner.analysis.cells import analyze, cell_counts
    from runner.output import Output
    from runner.probes import PROBES
    from runner.reporting.terminal import print_report

    prompts = BIG_PROMPTS // 10 if ctx["quick"] else BIG_PROMPTS
    tmp = Path(tempfile.mkdtemp(prefix="trialgrid-10m-"))
    try:
        out = tmp / "out"
        sec, total = timed(lambda: write_big_run(out, prompts))
        size = sum(p.stat().st_size for p in (out / "trials").iterdir()) / 2**20
        print(f"\n== report of a {total:,}-trial run: {prompts:,} prompts x {len(BIG_CONDITIONS)} conditions x "
              f"{BIG_RUNS} runs (misselection; {BIG_ERROR_RATE:.1%} error trials) ==")
        row("build synthetic Arrow run with pyarrow (not part of the report)", sec, f"{size:,.0f} MiB in 10 parts")
        # The whole `trialgrid report` cost in a fresh process: interpreter, imports, cached kernels, report.
        code = ("import io, sys, time; t = time.perf_counter(); from pathlib import Path; "
                "from rich.console import Console; from runner.reporting.terminal import print_report; "
                f"print_report(Path({str(out)!r}), Console(file=io.StringIO(), width=120)); "
                "print(time.perf_counter() - t)")
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        fresh = time.perf_counter() - t
        inner = float(proc.stdout.strip().splitlines()[-1])
        verdict = "within" if fresh <= 10.0 else "OVER"
        row("END TO END: fresh process, import + report (the 10 s target)", fresh, f"{verdict} 10 s "
            f"(of which imports + report {inner:.2f}s)")
        probe = PROBES["misselection"]
        sec_cells, cells = timed(lambda: cell_counts(Output.open(out).scan(), "misselection", probe.rates))
        row("  of which: polars scan + per-cell counts", sec_cells, f"{cells.height:,} cells from {total:,} trials")
        sec_an, analyses = timed(lambda: analyze(out))
        row("  of which: runner.analysis.cells.analyze (counts + all statistics)", sec_an, "")
        sec_rep, summary = timed(lambda: print_report(out, Console(file=io.StringIO(), width=120)))
        row("  in-process print_report (analysis + leaderboard + rendering)", sec_rep, "")
        print("  contrasts (model sim-10m):")
        for r in summary.contrasts.iter_rows(named=True):
            se = f" ± {r['mc_se_cell']:.1g} (MC s.e.)" if r["mc_se_cell"] else ""
            print(f"    {r['contrast']:<13} {100 * r['difference']:+.2f} pp [{100 * r['ci_lo']:+.2f}, "
                  f"{100 * r['ci_hi']:+.2f}]  p trial {r['p_trial']:.3g}  p cell {r['p_cell']:.3g}{se}")
            print(f"      trial: {r['method_trial']}")
            print(f"      cell:  {r['method_cell']}")
        conds = summary.conditions.filter(pl.col("rate") == "decoy_called")
        print("  decoy_called by condition: " + "; ".join(
            f"{c['condition']} {100 * c['value']:.2f}% [{100 * c['cluster_lo']:.2f}, {100 * c['cluster_hi']:.2f}]"
            for c in conds.iter_rows(named=True)))
        _before_after(ctx, cells, analyses)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _before_after(ctx: dict, cells, analyses) -> None:
    """The statistics of that report: the previous path (one bootstrap per interval, 20,000-draw Monte Carlo
    permutation tests at this size) beside the current one, on the same per-cell counts."""
    import polars as pl

    from stats import _draws as K
    from stats._rng import kernel_seed

    [a] = analyses
    model = cells.filter(pl.col("model") == "sim-10m")
    k = model["case_id"].n_unique()
    n_intervals = a.conditions.height * len(a.rates) + a.contrasts.height
    print(f"\n  statistics at {k:,} prompts, previous path vs now (same counts; ratio = previous / now; previous "
          f"timed at a tenth of its draws and scaled x10, its cost being linear in draws)")
    part = model.filter(pl.col("condition").is_in(["ungroundable", "groundable_unknown", "groundable_known"])
                        & (pl.col("n") > 0))
    arm = part["condition"].is_in(["ungroundable", "groundable_unknown"]).cast(pl.Int64).to_numpy()
    cl = part["case_id"].rank("dense").to_numpy()
    hits, n = part["decoy_called"].to_numpy(), part["n"].to_numpy()
    values = np.column_stack([np.bincount(cl - 1, hits), np.bincount(cl - 1, n)])
    old_boot, _ = timed(lambda: K.resample_cluster_sums(values, BOOT_DRAWS // 10, kernel_seed(1)))
    old_boot *= 10 * n_intervals
    sub = a.cells.filter(pl.col("model") == "sim-10m")
    hcols = [np.where(sub["condition"] == c, sub[r], 0) for c in BIG_CONDITIONS for r in a.rates]
    ncols = [np.where(sub["condition"] == c, sub["n"], 0) for c in BIG_CONDITIONS for r in a.rates]
    codes = sub["case_id"].rank("dense").to_numpy()
    new_boot, _ = timed(lambda: stats.cluster_rate_ci_many(codes, np.column_stack(hcols), np.column_stack(ncols),
                                                           differences=[(0, 6)], n_resamples=BOOT_DRAWS, seed=1,
                                                           method="percentile"))
    row(f"bootstrap: {n_intervals} intervals, one cluster_rate_ci each (previous)", old_boot, "extrapolated")
    row("bootstrap: cluster_rate_ci_many, one shared resample (percentile)", new_boot, "", old_boot)
    dflt, res = timed(lambda: stats.cluster_rate_ci_many(codes, np.column_stack(hcols), np.column_stack(ncols),
                                                        differences=[(0, 6)]), repeat=3)
    row(f"cluster_rate_ci_many, default method ({res[0].interval_method} / {res[-1].interval_method})", dflt,
        f"percentile / default time = {new_boot / dflt:.1f}", old_boot)
    # The two ways to read d columns off a shared resample, on the report's distinct per-prompt columns.
    from stats import bootstrap as B

    per_prompt = np.column_stack([np.bincount(codes - 1, c) for c in hcols + ncols[::len(a.rates)]])
    direct, _ = timed(lambda: K.bootstrap_sums_direct(per_prompt, BOOT_DRAWS, kernel_seed(1)))
    gemm, _ = timed(lambda: B.resample_clusters(per_prompt, BOOT_DRAWS, 1))
    row(f"  {per_prompt.shape[1]} columns: numba kernel adding d columns per drawn prompt", direct, "", old_boot)
    row(f"  {per_prompt.shape[1]} columns: count matrix x values (float32 BLAS GEMM, chunks)", gemm,
        f"used above d = {B.DIRECT_MAX_COLUMNS}; direct / GEMM = {direct / gemm:.2f}", old_boot)
    # The report's cost per contrast at this size: what the permutation tests did before, and do now.
    for level in ("trial", "cell"):
        old, res_old = timed(lambda: stats.cluster_permutation_test(cl, arm, hits, n, level=level,
                                                                     n_resamples=PERM_DRAWS // 10, seed=1))
        old *= 10
        new, res = timed(lambda: stats.cluster_permutation_test(cl, arm, hits, n, level=level, seed=1))
        row(f"{level}-level test, Monte Carlo {PERM_DRAWS:,} draws (previous default)", old,
            f"p {res_old.pvalue:.3g} (at {PERM_DRAWS // 10:,} draws) — floor of the method 1/(draws+1)")
        extra = f"± {res.mc_stderr:.1g}" if res.mc_stderr else f"± {res.pvalue_error:.1g} (bound)"
        row(f"{level}-level test now ({'tilted convolution' if res.pvalue_error is not None else 'MC, hybrid'})",
            new, f"p {res.pvalue:.3g} {extra}", old)


def huge_counts_section(ctx: dict) -> None:
    """Exact tests at huge counts (targets: Fisher/McNemar ≤ 50 ms at 1e5 and ≤ 1 s at 1e7 trials,
    the trial-level test on 1e7 trials in 10 prompts ≤ 10 s, a tiny arrangement space counted exactly)."""
    print("\n== exact tests at huge counts (ratio = scipy time / ours) ==")
    tables = [("1e4", [[2000, 2000], [2040, 1960]]), ("2e4", [[5000, 5000], [5100, 4900]]),
              ("1e5", [[25_000, 25_000], [25_400, 24_600]]), ("1e7", [[2_500_000, 2_500_000], [2_503_000, 2_497_000]])]
    for label, t in tables:
        sec, res = timed(lambda: stats.fisher_exact(t), repeat=3)
        ref = None
        if sps is not None:
            ref, r2 = timed(lambda: sps.fisher_exact(t), repeat=3)
            row(f"scipy.stats.fisher_exact, {label} trials", ref, f"p {r2.pvalue:.10g}")
        row(f"stats.fisher_exact, {label} trials", sec, f"p {res.pvalue:.10g}", ref)
    for label, (b, c) in (("1e5", (50_500, 49_500)), ("1e7", (5_003_000, 4_997_000))):
        sec, res = timed(lambda: stats.mcnemar_exact(b, c), repeat=3)
        ref = None
        if sps is not None:
            ref, r2 = timed(lambda: sps.binomtest(b, b + c, 0.5), repeat=3)
            row(f"scipy.stats.binomtest(½), {label} pairs", ref, f"p {r2.pvalue:.10g}")
        row(f"stats.mcnemar_exact, {label} pairs", sec, f"p {res.pvalue:.10g}", ref)
    # 10 prompts x 2 cells x 500,000 trials = 1e7 trials (the audit measured 597 s before the pmfs were trimmed)
    rng = np.random.default_rng(29)
    runs = 50_000 if ctx["quick"] else 500_000
    rates = rng.uniform(0.05, 0.6, 10)
    cl = np.repeat(np.arange(10), 2)
    arm = np.tile([1, 0], 10)
    n = np.full(20, runs)
    h = rng.binomial(n, np.repeat(rates, 2) * np.tile([1.002, 1.0], 10))
    for level in ("trial", "cell"):
        sec, res = timed(lambda: stats.cluster_permutation_test(cl, arm, h, n, level=level))
        row(f"{level}-level test, 10 prompts x 2 cells x {runs:,} trials", sec,
            f"p {res.pvalue:.4g}, floor {res.attainable_floor:.2g}; {res.method[:60]}")
    # 8 prompts x 2 cells of 20,000–34,000 trials: 256 arrangements, exact p 2/256 when every A cell is ahead
    n8 = rng.integers(20_000, 34_001, 16)
    h8 = np.where(np.tile([1, 0], 8) == 1, (0.31 * n8).astype(int), (0.30 * n8).astype(int))
    sec, res = timed(lambda: stats.cluster_permutation_test(np.repeat(np.arange(8), 2), np.tile([1, 0], 8), h8, n8,
                                                            level="cell"))
    row("cell-level test, 8 prompts x 2 cells of 20k–34k trials", sec,
        f"p {res.pvalue:.7g} (exact 0.0078125), floor {res.attainable_floor:.7g}")


SECTIONS: list[Callable[[dict], None]] = [permutation_section, bootstrap_section, big_report_section,
                                          huge_counts_section]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="time `ungrounded` at a tenth of the draws (extrapolated) and the big report at 1 M trials")
    parser.add_argument("--only", metavar="SECTION[,SECTION]",
                        help=f"run only these sections: {', '.join(s.__name__ for s in SECTIONS)}")
    args = parser.parse_args(argv[1:])
    quick = args.quick
    t = time.perf_counter()
    stats.cluster_permutation_test([0, 0], [1, 0], [1, 0], [2, 2], level="cell")  # load cached kernels
    stats.cluster_permutation_test([0, 0], [1, 0], [1, 0], [2, 2], level="cell", n_resamples=10, seed=0)
    stats.cluster_permutation_test([0, 0], [1, 0], [1, 0], [2, 2], level="trial", n_resamples=10, seed=0)
    stats.cluster_rate_ci([0, 1], [1, 0], [2, 2], n_resamples=10, seed=0)
    print(f"kernel load (numba cache; compiles only on first run after install): {time.perf_counter() - t:.2f}s")
    print("ungrounded:", "available" if ung is not None else "NOT importable (column skipped)")
    only = args.only.split(",") if args.only else None
    ctx = {"quick": quick, "designs": [make_design(12), make_design(1000)]}
    for section in SECTIONS:
        if only is None or section.__name__ in only:
            section(ctx)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

"""Reproduce published figures from the anchor data with trialgrid's own stats.

Usage: python benchmarks/reproduce_anchors.py [PATH_TO_ANCHORS]
(default: ../shared/anchors relative to the repository root).

Loads the raw per-trial rows with polars, aggregates them to per-cell counts
(the only thing stats/ ever sees), and prints ours beside each published
figure with a verdict: matches exactly, within Monte Carlo error, or why not.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]

import stats  # noqa: E402

MC_DRAWS_PUBLISHED = 20_000


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def ci_pct(ci) -> str:
    return f"{100 * ci[0]:.2f}% - {100 * ci[1]:.2f}%"


_DIFFERS: list[str] = []


def line(figure: str, ours: str, published: str, verdict: str) -> None:
    if "DIFFERS" in verdict:
        _DIFFERS.append(figure.strip())
    print(f"  {figure:<34} ours {ours:<28} published {published:<24} -> {verdict}")


def mc_verdict(exact: float, published: float, draws: int = MC_DRAWS_PUBLISHED) -> str:
    """Compare an exact p with a published Monte Carlo p = (b + 1) / (draws + 1)."""
    floor = 1.0 / (draws + 1)
    # Published figures are rounded to two significant digits, so "at the floor" is checked to 5%.
    if published <= floor * 1.05 and exact <= published:
        return f"published sits at its Monte Carlo floor 1/{draws + 1}; the exact p is smaller (consistent)"
    se = math.sqrt(published * (1 - published) / draws)
    z = (exact - published) / se
    if abs(z) <= 4:
        return f"within Monte Carlo error ({z:+.1f} SE of the published estimate)"
    return f"DIFFERS by {z:+.1f} SE"


def interval_verdict(ours, published, tol: float, what: str) -> str:
    d = max(abs(ours[0] - published[0]), abs(ours[1] - published[1]))
    if d <= 1e-12:
        return "matches exactly"
    if d <= tol:
        return f"within Monte Carlo error of a random interval (max endpoint gap {100 * d:.3f} pp <= {100 * tol:.1f} pp; {what})"
    return f"DIFFERS (max endpoint gap {100 * d:.2f} pp)"


def default_line(res) -> None:
    """Our default interval for the same figure, beside the published method's (a different method, not a check)."""
    line(f"  trialgrid default ({res.interval_method})", ci_pct(res.confidence_interval), "(other method)",
         f"for comparison: the report's {stats.INTERVAL_NAMES[res.interval_method]} (analytic, no resamples); "
         "see docs/statistics-coverage.md")


def exact_verdict(ours: str, published: str) -> str:
    return "matches exactly" if ours == published else "DIFFERS"


def cells(df: pl.DataFrame, cluster: str, by: list[str], outcome: str) -> pl.DataFrame:
    return df.group_by([cluster, *by]).agg(pl.col(outcome).sum().alias("hits"), pl.len().alias("n")).sort([cluster, *by])


def study3(base: Path) -> None:
    print("\n== ungrounded paper, Study 3 (exp3_results.csv; core set, status OK; cluster = idx) ==")
    published = {
        "claude-haiku-4-5-20251001": dict(a="43 / 720", b="5 / 360", ci=(0.0208, 0.1083), fisher=2.6e-4, perm=3.5e-4, firing="8 / 12"),
        "claude-sonnet-4-6": dict(a="112 / 720", b="8 / 360", ci=(0.0930, 0.2236), fisher=4.7e-13, perm=5.0e-5, firing="12 / 12"),
    }
    df = pl.read_csv(base / "ungrounded-paper" / "exp3_results.csv")
    df = df.filter((pl.col("set") == "core") & (pl.col("status") == "OK"))
    df = df.with_columns(pl.col("condition").is_in(["unresolved", "resolved_unknown"]).cast(pl.Int64).alias("arm"))
    for model, pub in published.items():
        c = cells(df.filter(pl.col("model") == model), "idx", ["condition", "arm"], "decoy_called")
        cl, arm, h, n = (c[k].to_numpy() for k in ("idx", "arm", "hits", "n"))
        a, b = arm == 1, arm == 0
        print(f" {model}")
        ours_a = f"{int(h[a].sum())} / {int(n[a].sum())}"
        ours_b = f"{int(h[b].sum())} / {int(n[b].sum())}"
        line("ungroundable hits / n", ours_a, pub["a"], exact_verdict(ours_a, pub["a"]))
        line("known hits / n", ours_b, pub["b"], exact_verdict(ours_b, pub["b"]))
        # The paper published a percentile cluster bootstrap: reproduce that method, then show our default beside it.
        boot = stats.cluster_rate_ci(cl[a], h[a], n[a], n_resamples=4000, seed=2026, method="percentile")
        line("cluster bootstrap 95% CI (A)", ci_pct(boot.confidence_interval), ci_pct(pub["ci"]),
             interval_verdict(boot.confidence_interval, pub["ci"], 0.005, f"{boot.n_resamples:,} prompt resamples"))
        default_line(stats.cluster_rate_ci(cl[a], h[a], n[a]))
        fisher = stats.fisher_exact([[h[a].sum(), n[a].sum() - h[a].sum()], [h[b].sum(), n[b].sum() - h[b].sum()]])
        f_ok = f"{fisher.pvalue:.1e}" == f"{pub['fisher']:.1e}"
        line("trial-level Fisher p", f"{fisher.pvalue:.2e}", f"{pub['fisher']:.1e}",
             "matches exactly (to the published 2 significant digits)" if f_ok else "DIFFERS")
        exact = stats.cluster_permutation_test(cl, arm, h, n, level="trial")
        mc = stats.cluster_permutation_test(cl, arm, h, n, level="trial", n_resamples=MC_DRAWS_PUBLISHED, seed=2026)
        line("cluster permutation p (exact)", f"{exact.pvalue:.3e}", f"{pub['perm']:.1e}", mc_verdict(exact.pvalue, pub["perm"]))
        line("  same test, our Monte Carlo", f"{mc.pvalue:.2e} ± {mc.mc_stderr:.1e}", f"{pub['perm']:.1e}",
             "same estimator, 20,000 draws (cross-check)")
        line("  attainable floor of the design", f"{exact.attainable_floor:.2e}", "(not published)", exact.method)
        fire = stats.prompts_firing(cl[a], h[a])
        ours_f = f"{fire.firing} / {fire.clusters}"
        line("prompts firing (arm A)", ours_f, pub["firing"], exact_verdict(ours_f, pub["firing"]))


LEADERBOARD = {
    "claude-opus-5": ("0.0 / 0.0 / 82.9%", "1.2%", 0.22, "3/12"),
    "gpt-5.6-sol": ("0.0 / 3.8 / 75.8%", "8.8%", 0.0049, "8/12"),
    "gpt-5.6-luna": ("14.2 / 17.5 / 77.9%", "16.7%", 0.017, "10/12"),
    "claude-haiku-4-5-20251001": ("1.2 / 17.1 / 66.7%", "18.8%", 0.0080, "8/12"),
    "gpt-5.6-terra": ("5.0 / 17.9 / 82.1%", "22.9%", 0.032, "12/12"),
    "claude-sonnet-4-6": ("0.8 / 29.6 / 84.2%", "35.8%", 0.00080, "10/12"),
}
CONDS = ["ungroundable", "groundable_unknown", "groundable_known"]


def leaderboard(base: Path) -> None:
    print("\n== ungrounded leaderboard (cluster = triple; cell-level permutation, exact enumeration) ==")
    for model, (pub_correct, pub_decoy, pub_p_table, pub_fire) in LEADERBOARD.items():
        df = pl.read_csv(base / "ungrounded-leaderboard" / f"{model}.csv").filter(pl.col("status") == "OK")
        summary = json.loads((base / "ungrounded-leaderboard" / f"{model}.json").read_text())
        df = df.with_columns((pl.col("condition") != "groundable_known").cast(pl.Int64).alias("arm"))
        print(f" {model}")
        rates = []
        for cond in CONDS:
            d = df.filter(pl.col("condition") == cond)
            rates.append(d["expected_called"].sum() / d.height)
        ours_correct = " / ".join(f"{100 * r:.1f}" for r in rates[:2]) + f" / {100 * rates[2]:.1f}%"
        # The table prints 0 as "0.0"; compare numerically at one decimal.
        pub_vals = [float(v.strip().rstrip("%")) for v in pub_correct.split("/")]
        ok = all(round(100 * r, 1) == v for r, v in zip(rates, pub_vals, strict=True))
        line("correct tool: unn / unf / fam", ours_correct, pub_correct, "matches exactly (to 0.1 pp)" if ok else "DIFFERS")
        u = df.filter(pl.col("condition") == "ungroundable")
        decoy = u["decoy_called"].sum() / u.height
        ok = f"{100 * decoy:.1f}%" == pub_decoy and abs(100 * decoy - summary["rates"]["ungroundable"]) < 1e-9
        line("decoy rate, unnamed", f"{100 * decoy:.2f}%", f"{pub_decoy} (json {summary['rates']['ungroundable']:.4f})",
             "matches exactly" if ok else "DIFFERS")
        c = cells(df, "triple_id", ["condition", "arm"], "decoy_called")
        cl, arm, h, n = (c[k].to_numpy() for k in ("triple_id", "arm", "hits", "n"))
        res = stats.cluster_permutation_test(cl, arm, h, n, level="cell")
        ok_diff = abs(100 * res.statistic - summary["difference_pp"]) < 1e-9
        line("difference A − B (pp)", f"{100 * res.statistic:.4f}", f"{summary['difference_pp']:.4f}",
             "matches exactly" if ok_diff else "DIFFERS")
        pub_p = summary["p_cluster_permutation"]
        line("cell-level permutation p", f"{res.pvalue:.5f} (exact)", f"{pub_p:.5f} (table {pub_p_table})",
             mc_verdict(res.pvalue, pub_p))
        line("  attainable floor", f"{res.attainable_floor:.2e}", f"{summary['resolution_floor']:.2e} (2/2^n)",
             "ours is the data's floor; the published figure ignores the data")
        fire = stats.prompts_firing(cl[arm == 1], h[arm == 1])
        ours_f = f"{fire.firing}/{fire.clusters}"
        ok = ours_f == pub_fire and fire.firing == summary["prompts_firing"]
        line("prompts firing (arm A)", ours_f, pub_fire, "matches exactly" if ok else "DIFFERS")


def agentprop(base: Path) -> None:
    root = base / "agentprop"
    print("\n== AgentProp-Bench: interceptor effect on hallucination (held-out minus control, same task ids) ==")
    held = pl.read_csv(root / "interceptor_heldout_600.csv")
    ctrl = pl.read_csv(root / "interceptor_control_600.csv")
    pub = {
        "gpt4o_mini": dict(rates="55.83% -> 32.83%", diff=-0.230, unpaired=(-0.285, -0.175), paired=(-0.272, -0.190)),
        "gemini_20_flash": dict(rates="44.50% -> 43.17%", diff=-0.013, unpaired=None, paired=None),
    }
    for model, p in pub.items():
        j = held.filter(pl.col("model") == model).select("task_id", pl.col("hallucination").alias("a")).join(
            ctrl.filter(pl.col("model") == model).select("task_id", pl.col("hallucination").alias("b")),
            on="task_id", how="inner",
        )
        a = j["a"].cast(pl.Int64).to_numpy()
        b = j["b"].cast(pl.Int64).to_numpy()
        res = stats.paired_difference(a, b, n_resamples=4000, seed=2026)
        print(f" {model} ({len(a)} paired task ids)")
        ours_rates = f"{100 * res.rate_b:.2f}% -> {100 * res.rate_a:.2f}%"
        line("hallucination control -> held-out", ours_rates, p["rates"], exact_verdict(ours_rates, p["rates"]))
        line("difference (pp)", f"{100 * res.statistic:.2f}", f"{100 * p['diff']:.1f}",
             "matches exactly (to 0.1 pp)" if round(100 * res.statistic, 1) == round(100 * p["diff"], 1) else "DIFFERS")
        # Unpaired: every trace its own cluster, arms resampled as independent traces.
        both = np.concatenate([a, b])
        arm = np.concatenate([np.ones_like(a), np.zeros_like(b)])
        unp = stats.cluster_rate_ci(np.arange(both.size), both, np.ones_like(both), arm=arm, n_resamples=4000, seed=2026,
                                    method="percentile")
        if p["unpaired"] is not None:
            line("unpaired bootstrap 95% CI", ci_pct(unp.confidence_interval), ci_pct(p["unpaired"]),
                 interval_verdict(unp.confidence_interval, p["unpaired"], 0.005,
                                  f"published 'about'; {unp.n_resamples:,} resamples"))
            line("paired-by-task bootstrap 95% CI", ci_pct(res.confidence_interval), ci_pct(p["paired"]),
                 interval_verdict(res.confidence_interval, p["paired"], 0.005,
                                  f"published 'about'; {res.n_resamples:,} resamples"))
        else:
            spans = res.confidence_interval.low < 0 < res.confidence_interval.high
            spans_u = unp.confidence_interval.low < 0 < unp.confidence_interval.high
            line("paired / unpaired CI", f"{ci_pct(res.confidence_interval)} / {ci_pct(unp.confidence_interval)}",
                 "spans zero", "matches (both span zero)" if spans and spans_u else "DIFFERS")
        mc = res.mcnemar
        line("exact McNemar p", f"{mc.pvalue:.3g} ({mc.a_only} vs {mc.b_only} discordant)",
             "significant" if model == "gpt4o_mini" else "not significant",
             ("matches (p < 0.05)" if mc.pvalue < 0.05 else "DIFFERS") if model == "gpt4o_mini"
             else ("matches (p >= 0.05)" if mc.pvalue >= 0.05 else "DIFFERS"))

    print("\n== AgentProp-Bench: hop rate r23 = P(wrong final answer | eps >= 2), p2_all_rejudged.csv ==")
    p2 = pl.read_csv(root / "p2_all_rejudged.csv")
    hops = json.loads((root / "hop_rates.json").read_text())
    s2 = p2.filter(pl.col("eps") >= 2).with_columns((~pl.col("ensemble_correct")).cast(pl.Int64).alias("wrong"))
    wrong, total = int(s2["wrong"].sum()), s2.height
    ours = f"{wrong}/{total} = {wrong / total:.3f}"
    line("pooled r23", ours, "123/158 = 0.778", exact_verdict(ours, "123/158 = 0.778"))
    for model in sorted(hops):
        d = s2.filter(pl.col("model") == model)
        ref = hops[model]["r_2_3"]
        if d.height != hops[model]["n_S2"]:
            line(f"{model} n_S2", str(d.height), str(hops[model]["n_S2"]), "DIFFERS")
            continue
        # Published: percentile bootstrap over traces, 1,000 resamples. Each trace is its own cluster here.
        boot = stats.cluster_rate_ci(d["session_id"].to_list(), d["wrong"].to_numpy(), np.ones(d.height, np.int64),
                                     n_resamples=1000, seed=42, method="percentile")
        point_ok = abs(boot.statistic - ref["point"]) < 1e-12
        # Intervals of a proportion of n traces move in steps of 1/n; allow two steps.
        tol = max(0.03, 2.0 / d.height)
        verdict = ("point matches exactly; interval " +
                   interval_verdict(boot.confidence_interval, (ref["lo"], ref["hi"]), tol,
                                    f"{boot.n_resamples:,} resamples of n={d.height}"))
        line(f"{model} r23 (n_S2={d.height})", f"{boot.statistic:.3f} [{boot.confidence_interval[0]:.3f}, {boot.confidence_interval[1]:.3f}]",
             f"{ref['point']:.3f} [{ref['lo']:.3f}, {ref['hi']:.3f}]", verdict if point_ok else "DIFFERS (point)")

    print("\n== AgentProp-Bench: Cohen's kappa of each rater against the 2-of-3 majority, ensemble_judge.csv ==")
    ej = pl.read_csv(root / "ensemble_judge.csv")
    metrics = json.loads((root / "ensemble_judge_metrics.json").read_text())
    for rater in ["heuristic_correct", "gpt4o_verdict", "gemini_25_flash_verdict", "gpt4o_mini_verdict"]:
        k = stats.cohen_kappa(ej[rater].to_list(), ej["majority"].to_list(), n_resamples=4000, seed=2026)
        key = rater.replace("_correct", "").replace("_verdict", "") + "_kappa"
        pubk = metrics[key]
        ok = abs(k.statistic - pubk) < 1e-9
        line(f"kappa {rater}", f"{k.statistic:.4f} [{k.confidence_interval[0]:.3f}, {k.confidence_interval[1]:.3f}]",
             f"{pubk:.4f}", "matches exactly" if ok else "DIFFERS")

    print("\n== AgentProp-Bench: Gemini-2.0-Flash tool-call rate (tool_selected non-empty), p2_all_rejudged.csv ==")
    g = p2.filter(pl.col("model") == "gemini_20_flash")
    called = g["tool_selected"].fill_null("").str.strip_chars().str.len_chars() > 0
    k_, n_ = int(called.sum()), g.height
    lo, hi = stats.wilson_interval(k_, n_)
    ok = round(k_ / n_, 2) == 0.05
    line("gemini_20_flash tool-call rate", f"{k_}/{n_} = {pct(k_ / n_)} (Wilson {pct(float(lo))}-{pct(float(hi))})",
         "about 5%", "matches (5.0%)" if ok else "DIFFERS")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0].splitlines()[0])
    parser.add_argument("anchors", nargs="?", type=Path, default=ROOT.parent / "shared" / "anchors",
                        help="the anchor folder (default: ../shared/anchors beside the repository)")
    base: Path = parser.parse_args(argv[1:]).anchors
    if not base.is_dir():
        print(f"anchor folder not found: {base} (pass the folder that holds ungrounded-paper/, "
              "ungrounded-leaderboard/ and agentprop/)", file=sys.stderr)
        return 2
    print(f"anchors: {base}")
    study3(base)
    leaderboard(base)
    agentprop(base)
    if _DIFFERS:
        print(f"\n{len(_DIFFERS)} figure(s) differ from the published ones: {', '.join(_DIFFERS)}")
        return 1
    print("\nevery figure matches the published one or is within its Monte Carlo error")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

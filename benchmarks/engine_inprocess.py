"""Throughput of the full in-process path: grid → sim agent → scoring → Arrow.

Usage: python benchmarks/engine_inprocess.py [--trials 200000] [--rss-trials 1000000] [--write-ahead-ab ROUNDS]

Runs the quickstart design (3 sim personas × 13 triples × 3 conditions) with the
run count scaled to reach ``--trials``, into a temporary directory, and prints
trials/s. Then, in a fresh subprocess, runs a ``--rss-trials`` grid and prints its
peak RSS (a subprocess so the first run's memory does not count). Figures drift with
machine load; compare runs made side by side. ``--write-ahead-ab N`` instead alternates N
runs with the write-ahead journal (``engine.write_ahead``, the default) and N without, and
prints the best trials per CPU-second of each and their ratio (the journal's cost).

``compare_with_ungrounded`` (used by ``benchmarks/hot_path.py``) runs this path and the
``ungrounded`` package's own mock loop alternately in one process and returns their
trials per CPU-second; ``ungrounded`` is a benchmark-only comparison (pip install
ungrounded), not a project dependency.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "configs" / "quickstart.yaml"


def scaled_sweep(tmp: Path, trials: int, **engine: object) -> Path:
    sweep = yaml.safe_load(QUICKSTART.read_text())
    if engine:
        sweep["engine"] = {**(sweep.get("engine") or {}), **engine}
    cells = 3 * 13 * 3  # models × triples × conditions of the quickstart
    sweep["probes"][0]["runs"] = max(1, math.ceil(trials / cells))
    for probe in sweep["probes"]:
        for key in ("cases", "catalogue"):
            probe[key] = str(QUICKSTART.parent / probe[key])
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


def run_once(trials: int, **engine: object) -> dict:
    import runner
    from runner.config.sweep import load_sweep

    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_sweep(scaled_sweep(Path(tmp), trials, **engine))
        started, cpu_started = time.perf_counter(), time.process_time()
        result = runner.run(loaded, Path(tmp) / "out", quiet=True)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        rows = sum(result.counts.values())
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"trials": rows, "seconds": elapsed, "cpu_s": cpu, "trials_per_s": rows / elapsed,
            "trials_per_cpu_s": rows / cpu, "peak_rss_mib": peak_mib}


def ungrounded_once(trials: int) -> dict:
    """``ungrounded``'s bare mock loop: ``Probe(model="mock").run()`` on its default triples, one worker.

    One worker because its threads only add lock contention to pure-Python work (its default
    of 6 is slower on 2 cores); no CSV is written, as trialgrid's run writes Arrow.
    """
    from ungrounded import DEFAULT_TRIPLES, Probe
    from ungrounded.stimuli import example_catalogue

    runs = max(1, math.ceil(trials / (len(DEFAULT_TRIPLES) * 3)))
    probe = Probe(model="mock", tools=example_catalogue(), runs=runs, workers=1, verbose=False)
    started, cpu_started = time.perf_counter(), time.process_time()
    result = probe.run()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    rows = len(result.trials)
    return {"trials": rows, "seconds": elapsed, "cpu_s": cpu, "trials_per_s": rows / elapsed,
            "trials_per_cpu_s": rows / cpu}


def compare_with_ungrounded(trials: int, rounds: int = 2) -> dict:
    """trialgrid's in-process path against ``ungrounded``'s mock loop, alternated ``rounds`` times in one process.

    Returns the best round of each (the least disturbed by other load on the machine), the
    ratios of trials per CPU-second and per wall second, and the marginal CPU per trialgrid
    trial: the CPU difference between a run of ``trials`` and one of a quarter as many,
    divided by the trials between them, so start-up costs cancel.
    """
    run_once(2_000)  # imports, caches: start-up is not measured
    ungrounded_once(2_000)
    ours, theirs = [], []
    for _ in range(rounds):
        theirs.append(ungrounded_once(trials))
        ours.append(run_once(trials))
    small = run_once(max(1, trials // 4))
    best_ours = max(ours, key=lambda r: r["trials_per_cpu_s"])
    best_theirs = max(theirs, key=lambda r: r["trials_per_cpu_s"])
    marginal_us = 1e6 * (best_ours["cpu_s"] - small["cpu_s"]) / max(1, best_ours["trials"] - small["trials"])
    return {"trialgrid": best_ours, "ungrounded": best_theirs, "small": small,
            "cpu_ratio": best_ours["trials_per_cpu_s"] / best_theirs["trials_per_cpu_s"],
            "wall_ratio": max(r["trials_per_s"] for r in ours) / max(r["trials_per_s"] for r in theirs),
            "marginal_cpu_us": marginal_us}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200_000)
    parser.add_argument("--rss-trials", type=int, default=1_000_000)
    parser.add_argument("--write-ahead-ab", type=int, default=0, metavar="ROUNDS",
                        help="alternate runs with and without the write-ahead journal")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_once(args.child)))
        return
    if args.write_ahead_ab:
        run_once(2_000)  # imports, caches
        runs: dict[bool, list[dict]] = {True: [], False: []}
        for _ in range(args.write_ahead_ab):
            for on in (True, False):
                runs[on].append(run_once(args.trials, write_ahead=on))
        best = {on: max(r["trials_per_cpu_s"] for r in rs) for on, rs in runs.items()}
        for on in (True, False):
            print(f"  write_ahead {str(on).lower():5s}: " + ", ".join(f"{r['trials_per_cpu_s']:,.0f}" for r in runs[on])
                  + f" trials/CPU-s (best {best[on]:,.0f})")
        print(f"  journal on / off, best of each: {best[True] / best[False]:.3f}")
        return
    print("in-process path (grid → sim → misselection scoring → Arrow IPC), quickstart design")
    warm = run_once(2_000)  # imports, caches
    r = run_once(args.trials)
    print(f"  {r['trials']:>10,} trials in {r['seconds']:.2f} s = {r['trials_per_s']:,.0f} trials/s "
          f"(warm-up {warm['trials']:,} trials at {warm['trials_per_s']:,.0f}/s)")
    child = subprocess.run([sys.executable, __file__, "--child", str(args.rss_trials)], capture_output=True, text=True, check=True)
    c = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"  {c['trials']:>10,} trials in {c['seconds']:.2f} s = {c['trials_per_s']:,.0f} trials/s, "
          f"peak RSS {c['peak_rss_mib']:,.0f} MiB (fresh process)")


if __name__ == "__main__":
    main()

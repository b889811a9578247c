"""Throughput of the full in-process path: grid → sim agent → scoring → Arrow.

Usage: python benchmarks/engine_inprocess.py [--trials 200000] [--rss-trials 1000000]

Runs the quickstart design (3 sim personas × 13 triples × 3 conditions) with the
run count scaled to reach ``--trials``, into a temporary directory, and prints
trials/s. Then, in a fresh subprocess, runs a ``--rss-trials`` grid and prints its
peak RSS (a subprocess so the first run's memory does not count). Figures drift with
machine load; compare runs made side by side.
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


def scaled_sweep(tmp: Path, trials: int) -> Path:
    sweep = yaml.safe_load(QUICKSTART.read_text())
    cells = 3 * 13 * 3  # models × triples × conditions of the quickstart
    sweep["probes"][0]["runs"] = max(1, math.ceil(trials / cells))
    for probe in sweep["probes"]:
        for key in ("cases", "catalogue"):
            probe[key] = str(QUICKSTART.parent / probe[key])
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


def run_once(trials: int) -> dict:
    from runner.config.sweep import load_sweep
    from runner.execution.run import run_sweep

    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_sweep(scaled_sweep(Path(tmp), trials))
        started = time.perf_counter()
        result = run_sweep(loaded, Path(tmp) / "out", quiet=True)
        elapsed = time.perf_counter() - started
        rows = sum(result.counts.values())
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"trials": rows, "seconds": elapsed, "trials_per_s": rows / elapsed, "peak_rss_mib": peak_mib}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200_000)
    parser.add_argument("--rss-trials", type=int, default=1_000_000)
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_once(args.child)))
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

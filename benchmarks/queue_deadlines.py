"""Concurrency 1024 against ``trialgrid serve``: does any trial time out before its first request is sent?

Usage: python benchmarks/queue_deadlines.py [--runs 129] [--concurrency 1024] [--latency-ms 50] [--timeout-s 120]

``trialgrid serve`` (a real process) answers the quickstart over the OpenAI wire format (117 trials per
run: 15,093 at ``--runs 129``, a grid deep enough to queue), run by ``trialgrid run`` (a real
process) with ``--concurrency`` trials in flight overall and per model. Printed: the trials, the wall
time, the rows by status, and the timeouts split by ``attempts`` — a timeout with ``attempts = 0`` is a
trial whose deadline ran out while it waited its turn, before any request went out. Since deadlines
start at a trial's first send (``runner/execution/deadlines.py``), there should be none.

A benchmark, not a test; quote it with the load average. Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kill_resend import Serve  # noqa: E402  (trialgrid serve in a child process)
from stop_signal import sweep  # noqa: E402  (the quickstart over HTTP)

import runner  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=129)
    parser.add_argument("--concurrency", type=int, default=1024)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; {117 * args.runs:,} trials at concurrency {args.concurrency}, "
          f"latency {args.latency_ms:g} ms, engine.timeout_s {args.timeout_s:g}", flush=True)
    server = Serve(args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = sweep(server.url + "/v1", args.runs, args.concurrency)
            data["engine"]["timeout_s"] = args.timeout_s
            path = Path(tmp) / "sweep.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False))
            out = Path(tmp) / "out"
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "runner", "run", str(path), "--out", str(out), "--quiet",
                                   "--no-report"], cwd=ROOT, capture_output=True, text=True)
            wall = time.perf_counter() - started
            df = runner.load(out).collect()
            by_status = dict(df.group_by("status").len().iter_rows())
            timeouts = df.filter(pl.col("error_kind") == "timeout")
            by_attempts = dict(timeouts.group_by("attempts").len().sort("attempts").iter_rows())
            print(f"exit {done.returncode}; {df.height:,} rows ({df['trial_id'].n_unique():,} distinct) in "
                  f"{wall:.1f} s; by status {by_status}; timeouts {timeouts.height} (by attempts: {by_attempts}); "
                  f"timeouts with attempts = 0: {by_attempts.get(0, 0)}; server max in flight "
                  f"{server.stats()['max_concurrency']} (load average {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()

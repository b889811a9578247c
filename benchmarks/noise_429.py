"""Random 429s are noise, not a limit: a sweep's throughput with 8% of answers 429 (``Retry-After: 1``) beside a
clean run, against the same unlimited ``trialgrid serve``.

Usage:
  python benchmarks/noise_429.py                       # quickstart x120 (14,040 trials), concurrency 128
  python benchmarks/noise_429.py --runs 40 --share 0.08 0.2

For each share it starts ``trialgrid serve --latency-ms 20 --fault 429=SHARE`` on 127.0.0.1 (no rate limit: every
429 is a blip whose ``Retry-After`` is 1 s), runs the quickstart sweep through ``runner.run`` with
``provider: openai``, no ``limits:``, engine and model concurrency 128, and prints trials per second by wall clock,
the rows by status, and the ratio to the clean run (share 0), with the load average. What it checks: the pace does
not read noise as a limit (``runner.providers.pacing``: a burst is judged against the server's background share of
429s), and a trial waiting out its Retry-After lends its place to another (``runner.core.parking``).

Measured 2026-12-06, ``--runs 120``, load average 0.5–1.0 on 2 cores: clean 1,943 trials/s; 8% 429s 1,362 trials/s,
0.70 of clean, every trial ok (before: 38 trials/s, 0.02 of clean).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from herd import sweep_dict  # noqa: E402


def sweep(base_url: str, runs: int, concurrency: int) -> dict[str, Any]:
    data = sweep_dict(base_url, runs)  # the herd benchmark's quickstart against a server: provider openai, no limits
    data["engine"] = {**(data.get("engine") or {}), "concurrency": concurrency}
    for model in data["models"]:
        model["concurrency"] = concurrency
    return data


def run_case(share: float, runs: int, concurrency: int) -> tuple[float, dict[str, int]]:
    import runner

    args = [sys.executable, "-m", "runner", "serve", "--port", "0", "--latency-ms", "20"]
    if share:
        args += ["--fault", f"429={share:g}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        found = re.search(r"http://[0-9.:]+", proc.stdout.readline())
        assert found, "trialgrid serve did not say where it listens"
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "sweep.yaml"
            path.write_text(yaml.safe_dump(sweep(found.group(0) + "/v1", runs, concurrency)))
            with warnings.catch_warnings():  # the sweep's notes (a local server) are not figures
                warnings.simplefilter("ignore")
                started = time.monotonic()
                result = runner.run(path, Path(tmp) / "out", quiet=True, preflight=False)
                wall = time.monotonic() - started
        return result.total / wall, dict(result.counts)
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=120, help="quickstart runs per cell (117 trials each)")
    parser.add_argument("--share", type=float, nargs="+", default=[0.08], help="shares of random 429s")
    parser.add_argument("--concurrency", type=int, default=128)
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores; "
          f"quickstart x{args.runs}, concurrency {args.concurrency}, serve --latency-ms 20, Retry-After 1 s")
    clean, counts = run_case(0.0, args.runs, args.concurrency)
    print(f"  429s  0%: {clean:8,.0f} trials/s  {counts}")
    for share in args.share:
        rate, counts = run_case(share, args.runs, args.concurrency)
        print(f"  429s {share:.0%}: {rate:8,.0f} trials/s  {counts}  {rate / clean:.2f} of clean")
    print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

"""A kill -9 against ``trialgrid serve``: how many answers the server had already sent are bought again on resume.

Usage: python benchmarks/kill_resend.py [--tries 3] [--runs 20] [--at 1000] [--concurrency 64] [--latency-ms 20]

Per try: ``trialgrid serve`` (a real process, its own request log) answers the quickstart over the
OpenAI wire format (117 trials per run: 2,340 at ``--runs 20``), run by ``trialgrid run`` (a real
process) at ``--concurrency``. Once the server has sent ``--at`` whole answers, the run gets SIGKILL;
when the server has no request left in flight, the same command resumes it to the end.

Counted from the server's own log (``GET /stats?log=1``: each request's digest — its body and seed
header, so one per trial — and when its answer went out whole, ``runner/sim/serve/stats.py``), with the
kill's instant read on the server's clock just after the signal:

- ``answered``: distinct requests whose answer the server had sent whole before the kill;
- ``answered_resent``: of those, the ones the resume sent again (a paid answer lost);
- ``in_flight_resent``: requests sent before the kill whose answer had not gone out (an answer the run
  never had; sending it again buys nothing twice).

Then the output is checked: every trial once, and the outcome columns equal to an uninterrupted
in-process run of the same sweep (``provider: sim`` gives the same outcomes by construction).

A benchmark, not a test (``tests/execution/test_exactly_once.py`` asserts the behaviour); quote it with
the load average.

Answered and in-flight re-sends add up to about the concurrency: the answered ones are answers the client had
not yet read off its socket, not rows waiting for their batch (the write-ahead journal holds those).
Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stop_signal import OUTCOMES, sweep  # noqa: E402  (the quickstart over HTTP, and the columns compared)

import runner  # noqa: E402
from runner.config.sweep import load_sweep  # noqa: E402


class Serve:
    """``trialgrid serve --port 0`` in a child process, read through its ``/stats``."""

    def __init__(self, latency_ms: float) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "runner", "serve", "--port", "0",
                                      "--latency-ms", str(latency_ms)], cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        found = None
        while found is None:  # past any warning printed before the line that names the address
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("trialgrid serve did not start")
            found = re.search(r"on (http://[0-9.]+:\d+)", line)
        self.url = found.group(1)

    def stats(self, with_log: bool = False) -> dict:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return json.loads(opener.open(f"{self.url}/stats{'?log=1' if with_log else ''}", timeout=60).read())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def count(log: dict, killed_at: float) -> dict[str, int]:
    """The server's log cut at the kill: answers sent whole before it, and what of them the resume sent again."""
    before_answered: set[str] = set()
    before_other: set[str] = set()
    after: list[str] = []
    for t, digest, sent in zip(log["t"], log["digest"], log["sent"], strict=True):
        if not digest:
            continue
        if t <= killed_at:
            (before_answered if sent is not None and sent <= killed_at else before_other).add(digest)
        else:
            after.append(digest)
    resent = set(after)
    return {"requests": len(log["t"]), "answered": len(before_answered),
            "answered_resent": len(before_answered & resent),
            "in_flight_resent": len((before_other - before_answered) & resent),
            "resume_requests": len(after), "resume_distinct": len(resent)}


def one_try(folder: Path, args: argparse.Namespace, expected: pl.DataFrame) -> dict:
    server = Serve(args.latency_ms)
    try:
        path = folder / "sweep.yaml"
        path.write_text(yaml.safe_dump(sweep(server.url + "/v1", args.runs, args.concurrency), sort_keys=False))
        out = folder / "out"
        cmd = [sys.executable, "-m", "runner", "run", str(path), "--out", str(out), "--quiet", "--no-report"]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while proc.poll() is None and server.stats()["by_status"].get("200", 0) < args.at:
            time.sleep(0.02)
        alive = proc.poll() is None
        proc.kill()
        killed_at = server.stats()["uptime_s"]  # after the signal: an answer sent up to here counts as answered
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
        while server.stats()["in_flight"]:  # the killed run's last requests end on the server
            time.sleep(0.05)
        journals = len(list((out / "trials").glob("journal-*.jsonl")))
        resumed = subprocess.run([c for c in cmd if c != "--quiet"], cwd=ROOT, capture_output=True, text=True)
        replayed = re.search(r"replayed ([\d,]+) answered trials", resumed.stderr)
        figures = count(server.stats(with_log=True)["log"], killed_at)
        df = runner.load(out).collect()
        once = df.height == df["trial_id"].n_unique() == expected.height
        equal = once and df.select(OUTCOMES).sort(OUTCOMES[:4]).equals(expected)
        return {"alive_at_kill": alive, "journals_left": journals, "resume_exit": resumed.returncode,
                "replayed": int(replayed.group(1).replace(",", "")) if replayed else 0, **figures,
                "answered_resent_pct": round(100 * figures["answered_resent"] / max(1, figures["answered"]), 2),
                "exactly_once": once, "equals_uninterrupted": equal}
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--at", type=int, default=1000, help="whole answers sent by the server before the kill")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; kill -9 after {args.at:,} answers, concurrency "
          f"{args.concurrency}, latency {args.latency_ms:g} ms", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "reference.yaml"
        ref.write_text(yaml.safe_dump(sweep(None, args.runs, args.concurrency), sort_keys=False))
        runner.run(load_sweep(ref), Path(tmp) / "reference", quiet=True)
        expected = runner.load(Path(tmp) / "reference").collect().select(OUTCOMES).sort(OUTCOMES[:4])
        totals = {"answered": 0, "answered_resent": 0, "in_flight_resent": 0}
        for i in range(args.tries):
            folder = Path(tmp) / f"try{i}"
            folder.mkdir()
            result = one_try(folder, args, expected)
            for k in totals:
                totals[k] += int(result[k])
            print(f"try {i + 1}: {result}  (load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"all tries: {totals['answered_resent']} of {totals['answered']:,} answered trials re-sent "
              f"({100 * totals['answered_resent'] / max(1, totals['answered']):.2f}%), "
              f"{totals['in_flight_resent']} requests in flight at the kill re-sent "
              f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()

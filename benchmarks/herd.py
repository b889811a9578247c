"""The thundering herd: a sweep with no ``limits:`` against a token-bucket rate limit it must learn.

Usage:
  python benchmarks/herd.py                          # with and without rate-limit headers, single node
  python benchmarks/herd.py --ray                    # the same through Ray with 2 workers
  python benchmarks/herd.py --modes none --runs 1    # one case only
  python benchmarks/herd.py --faults 0 --random-429 0.08 --rpm 600   # 8% 429s that have nothing to do with rate
  python benchmarks/herd.py --faults 0 --random-429 0 0.08 --rpm 600 --modes none --burst-rule on off
                                                     # the burst rule for header-less 429s, on and off, side by side

Starts ``trialgrid serve --rpm 60 --rpm-mode bucket`` (a token bucket of one
request, refilled once a second, with short Retry-Afters, as the vendors enforce
their per-minute limits) with 5% 500s and 5% 503s, in a subprocess on 127.0.0.1,
once with the vendor's rate-limit headers on every answer and once without (so
only 429s teach the pace). The quickstart sweep (117 trials at ``--runs 1``) runs
against it with ``provider: openai`` and no ``limits:``. Then it reads the server's
own request log and prints, per case:

- limit used: requests the server admitted (every answer that was not a 429),
  per minute over the span from the first to the last, as a share of its limit;
- 429s: how often the client still ran into the limit;
- trials lost: rows whose status is not ``ok``;
- wall time of the run.

With several ``--random-429`` shares, each row also gives its limit used as a ratio
to the same case's at the first share (0 for "of the no-429 rate"). ``--burst-rule
off`` makes every 429 without headers evidence of the limit (a cut and a key
pause), as before the burst rule (``runner.providers.pacing.BURST_MIN``).

Nothing here leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "configs" / "quickstart.yaml"


def start_server(rpm: int, headers: bool, fault_rate: float, latency_ms: float,
                 random_429: float = 0.0) -> tuple[subprocess.Popen, str]:
    half = f"{fault_rate / 2:g}"
    args = [sys.executable, "-m", "runner", "serve", "--port", "0", "--rpm", str(rpm), "--rpm-mode", "bucket",
            "--fault", f"500={half}", "--fault", f"503={half}", "--latency-ms", str(latency_ms),
            "--rate-headers" if headers else "--no-rate-headers"]
    if random_429:  # a vendor's overload blips: 429s drawn at random, whatever the rate
        args += ["--fault", f"429={random_429:g}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = line.split("serving the simulated agent on ", 1)[1].split()[0]
    return proc, url


def sweep_dict(base_url: str, runs: int) -> dict[str, Any]:
    data = yaml.safe_load(QUICKSTART.read_text())
    for probe in data["probes"]:
        probe["runs"] = runs
        for key in ("cases", "catalogue"):
            probe[key] = str(QUICKSTART.parent / probe[key])
    for m in data["models"]:
        m.update(provider="openai", base_url=base_url, api_key_env=None)  # no limits: they are learned
    return data


def limit_used(log: dict[str, list[Any]], rpm: int, window_s: float = 60.0) -> tuple[float, int, int]:
    """(admitted per window as a share of ``rpm``, requests admitted, 429s) from the server's own log."""
    admitted = sorted(t for t, s in zip(log["t"], log["status"], strict=True) if s != 429)
    limited = sum(1 for s in log["status"] if s == 429)
    if len(admitted) < 2:
        return 0.0, len(admitted), limited
    # n admissions span n - 1 refill intervals
    rate = (len(admitted) - 1) / (admitted[-1] - admitted[0]) * window_s
    return rate / rpm, len(admitted), limited


def run_case(headers: bool, *, ray: bool, rpm: int, runs: int, fault_rate: float, latency_ms: float,
             log_out: Path | None = None, random_429: float = 0.0, burst_rule: bool = True) -> dict[str, Any]:
    import polars as pl

    import runner
    from runner.config.sweep import load_sweep
    from runner.providers import pacing

    # off: one 429 is a burst (every header-less 429 cuts and pauses). In-process only: Ray workers keep the rule.
    pacing.BURST_MIN, pacing.BURST_P = (3, 1e-3) if burst_rule else (1, 2.0)

    proc, url = start_server(rpm, headers, fault_rate, latency_ms, random_429)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "sweep.yaml"
            path.write_text(yaml.safe_dump(sweep_dict(url + "/v1", runs)))
            with warnings.catch_warnings():  # the sweep's notes (few runs, a local server) are not figures
                warnings.simplefilter("ignore")
                loaded = load_sweep(path)
            started = time.monotonic()
            if ray:

                runner.run(loaded, Path(tmp) / "out", mode="ray", address="local", workers=2, quiet=True, backend_options={"num_cpus": 2})
            else:
                runner.run(loaded, Path(tmp) / "out", quiet=True)
            wall = time.monotonic() - started
            df = pl.scan_ipc(str(Path(tmp) / "out" / "trials" / "*.arrow")).collect()
        with urllib.request.urlopen(url + "/stats?log=1") as response:
            stats = json.loads(response.read())
    finally:
        proc.terminate()
        proc.wait(10)
    if log_out is not None:
        log_out.write_text(json.dumps(stats["log"]))
    share, admitted, limited = limit_used(stats["log"], rpm)
    lost = int(df.filter(pl.col("status") != "ok").height)
    return {"headers": headers, "ray": ray, "trials": df.height, "lost": lost, "requests": stats["requests"],
            "admitted": admitted, "429s": limited, "limit_used": share, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rpm", type=int, default=60)
    parser.add_argument("--runs", type=int, default=1, help="quickstart runs per cell (117 trials each)")
    parser.add_argument("--faults", type=float, default=0.10, help="share of 5xx answers (half 500, half 503)")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--modes", nargs="+", choices=["headers", "none"], default=["headers", "none"])
    parser.add_argument("--ray", action="store_true", help="through Ray with 2 workers instead of single-node")
    parser.add_argument("--random-429", type=float, nargs="+", default=[0.0],
                        help="share of answers that are a 429 drawn at random (overload noise, not the rate limit); "
                             "several: each is a case, compared with the first")
    parser.add_argument("--burst-rule", nargs="+", choices=["on", "off"], default=["on"],
                        help="the burst rule for 429s without headers (off: every such 429 cuts and pauses)")
    parser.add_argument("--log-dir", type=Path, help="write the server's request log of each case here (JSON)")
    args = parser.parse_args()
    shares = ", ".join(f"{r:.0%}" for r in args.random_429)
    print(f"server: --rpm {args.rpm} --rpm-mode bucket, {args.faults:.0%} 5xx, {shares} random 429s, "
          f"{args.latency_ms:g} ms; "
          f"sweep: quickstart x{args.runs}, no limits; {'Ray, 2 workers' if args.ray else 'single node'}")
    print(f"{'rate headers':<14}{'burst rule':>11}{'random 429':>11}{'trials':>7}{'lost':>6}{'requests':>10}"
          f"{'429s':>6}{'limit used':>12}{'ratio':>7}{'wall':>9}")
    for mode in args.modes:
        for rule in args.burst_rule:
            first: float | None = None
            for random_429 in args.random_429:
                name = f"herd-{mode}-{'ray' if args.ray else 'local'}-burst-{rule}-r{random_429:g}.json"
                r = run_case(mode == "headers", ray=args.ray, rpm=args.rpm, runs=args.runs, fault_rate=args.faults,
                             latency_ms=args.latency_ms, random_429=random_429, burst_rule=rule == "on",
                             log_out=args.log_dir / name if args.log_dir else None)
                first = r["limit_used"] if first is None else first
                ratio = r["limit_used"] / first if first else float("nan")
                print(f"{'sent' if r['headers'] else 'none':<14}{rule:>11}{random_429:>11.0%}{r['trials']:>7}"
                      f"{r['lost']:>6}{r['requests']:>10}{r['429s']:>6}{r['limit_used']:>11.1%}{ratio:>7.2f}"
                      f"{r['wall_s']:>8.0f}s", flush=True)


if __name__ == "__main__":
    main()

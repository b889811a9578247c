"""How fast ``trialgrid view`` answers on large outputs, and how much memory its server holds.

Usage: python benchmarks/view.py [--trials 100000 1000000] [--cache DIR]

For each size, a real output made by the engine (the quickstart design, ``provider: sim``, its ``runs:``
raised to reach the size; built once and kept in ``--cache``), then ``trialgrid view OUT --port 0`` started as
its own process and asked, over HTTP, what the page asks: the first page of trials, the run with its filter
columns, a filtered page (a model, an outcome and a text search), a sorted page, a trial's detail (the first
one asked, then others) and the rates (the report's analysis, computed once). Prints each latency and the
server's resident memory (RSS) before and after the rates (the report's analysis), the time from the process's
start to the rates, and then a fresh server asked for the rates first (nothing else): the time to the rates page
and the peak while it gets there. The list page asks for its
rows and its count apart (the rows come first), so each is timed. Figures, not a test (issue 25's targets: first page ≤ 1 s after
start, a filtered page ≤ 2 s, a detail ≤ 200 ms, RSS bounded whatever the size).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
CELLS = 3 * 13 * 3  # models × triples × conditions of the quickstart
RATES_TIMEOUT = 900.0


def build(cache: Path, trials: int) -> Path:
    """The quickstart scaled to ``trials`` (at least), run by the engine into ``cache/out-N`` unless already there."""
    from runner.config.sweep import load_sweep
    from runner.core.manifest import read_manifest
    from runner.execution.run import run_sweep

    out = cache / f"out-{trials}"
    manifest = read_manifest(out) if (out / "manifest.json").exists() else None
    if manifest is not None and str(manifest.status) == "complete":
        return out
    sweep = yaml.safe_load((CONFIGS / "quickstart.yaml").read_text())
    sweep["probes"][0]["runs"] = max(1, math.ceil(trials / CELLS))
    for probe in sweep["probes"]:
        for key in ("cases", "catalogue"):
            probe[key] = str(CONFIGS / probe[key])
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"quickstart-{trials}.yaml"
    path.write_text(yaml.safe_dump(sweep))
    started = time.perf_counter()
    run_sweep(load_sweep(path), out, quiet=True)
    print(f"  built {out} in {time.perf_counter() - started:.0f} s")
    return out


def timed(url: str, timeout: float = 300) -> tuple[float, dict]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body = json.loads(response.read())
    return time.perf_counter() - started, body


def measure(out: Path) -> None:
    env = {**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "runner", "view", str(out), "--port", "0"], stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        listening = time.perf_counter() - started
        server = psutil.Process(proc.pid)
        cpu = server.cpu_times()
        listen_cpu = cpu.user + cpu.system
        base = line.split("trialgrid view: ", 1)[1].split(" ", 1)[0]
        api = base + "api/runs/0"
        # what the list page asks: the rows (count=0) and the count, side by side
        first, _ = timed(api + "/trials?offset=0&limit=50&count=0")
        since_start = time.perf_counter() - started
        first_count, counted = timed(api + "/count")
        total = counted["total"]
        columns, _ = timed(api)
        filt = "f.model=sim-reckless&f.decoy_called=true"
        filtered, fpage = timed(api + f"/trials?{filt}&offset=0&limit=50&count=0")
        filtered_count, fcount = timed(api + f"/count?{filt}")
        search = "f.decoy_called=true&q=quorbis"
        searched, spage = timed(api + f"/trials?{search}&offset=0&limit=50&count=0")
        searched_count, scount = timed(api + f"/count?{search}")
        searched_next, _ = timed(api + f"/trials?{search}&offset=50&limit=50")  # the count is known now
        sorted_, _ = timed(api + "/trials?sort=latency_ms&desc=1&offset=0&limit=50&count=0")
        deep, _ = timed(api + f"/trials?offset={total // 2}&limit=50&count=0")
        ids = [r["trial_id"] for r in fpage["rows"][:6]]
        details = [timed(api + f"/trials/{tid}?{filt}&pos={i}")[0] for i, tid in enumerate(ids)]
        rss_before_rates = server.memory_info().rss / 2**20
        size = sum(p.stat().st_size for p in (out / "trials").glob("*.arrow*")) / 2**20
        print(f"  {total:,} trials, {size:,.0f} MiB of parts, load average now {os.getloadavg()[0]:.1f}")
        print(f"  listening after start         {listening * 1000:8.0f} ms  ({listen_cpu:.2f} CPU s: imports, footers)")
        print(f"  first page (rows)             {first * 1000:8.0f} ms  ({since_start * 1000:.0f} ms after start)")
        print(f"  count of every trial          {first_count * 1000:8.0f} ms")
        print(f"  run + filter columns          {columns * 1000:8.0f} ms")
        print(f"  filtered page (model+outcome) {filtered * 1000:8.0f} ms  rows, {filtered_count * 1000:.0f} ms "
              f"count ({fcount['total']:,} trials)")
        print(f"  filtered + text search        {searched * 1000:8.0f} ms  rows, {searched_count * 1000:.0f} ms "
              f"count ({scount['total']:,} trials; {len(spage['rows'])} on the page)")
        print(f"  its next page, with count     {searched_next * 1000:8.0f} ms")
        print(f"  sorted page (latency desc)    {sorted_ * 1000:8.0f} ms")
        print(f"  page in the middle            {deep * 1000:8.0f} ms")
        print(f"  trial detail, first           {details[0] * 1000:8.0f} ms  (waits for the index and call blobs "
              "if warm-up has not built them yet)")
        print(f"  trial detail, next ones       {max(details[1:]) * 1000:8.0f} ms  (max of {len(details) - 1})")
        print(f"  server RSS before the rates   {rss_before_rates:8.0f} MiB", flush=True)
        try:  # the report's analysis: as slow as `trialgrid report` on this output
            rates_first, _ = timed(api + "/rates", timeout=RATES_TIMEOUT)
            ready = time.perf_counter() - started
            rates_again, _ = timed(api + "/rates")
            print(f"  rates, first / again          {rates_first * 1000:8.0f} / {rates_again * 1000:.0f} ms  "
                  f"({ready:.1f} s after start; warm-up began the analysis after the first page)")
        except TimeoutError:
            print(f"  rates                         no answer in {RATES_TIMEOUT:.0f} s (the report's analysis)")
        rss = server.memory_info().rss / 2**20
        status = dict(x.split(":", 1) for x in Path(f"/proc/{proc.pid}/status").read_text().splitlines() if ":" in x)
        peak = int(status.get("VmHWM", "0 kB").split()[0]) / 1024  # the most the server ever held
        print(f"  server RSS after the rates    {rss:8.0f} MiB, {peak:.0f} MiB at its peak", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def rates_alone(out: Path) -> None:
    """A fresh server asked for the rates as soon as it listens, and nothing else: the time to the rates page
    from the process's start, and the server's peak while it gets there (the analysis beside the warm-up)."""
    env = {**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "runner", "view", str(out), "--port", "0"], stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stderr is not None
        base = proc.stderr.readline().split("trialgrid view: ", 1)[1].split(" ", 1)[0]
        try:
            timed(base + "api/runs/0/rates", timeout=RATES_TIMEOUT)
            took = f"{time.perf_counter() - started:8.1f} s  after start"
        except TimeoutError:
            took = f"no answer in {RATES_TIMEOUT:.0f} s"
        server = psutil.Process(proc.pid)
        cpu = server.cpu_times()
        status = dict(x.split(":", 1) for x in Path(f"/proc/{proc.pid}/status").read_text().splitlines() if ":" in x)
        peak = int(status.get("VmHWM", "0 kB").split()[0]) / 1024
        print(f"  rates asked first (fresh server) {took} ({cpu.user + cpu.system:.1f} CPU s), "
              f"{peak:.0f} MiB peak RSS, load average now {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "trialgrid-view-bench")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for n in args.trials:
        print(f"{n:,} trials")
        out = build(args.cache, n)
        measure(out)
        rates_alone(out)


if __name__ == "__main__":
    main()

"""Ray mode versus single-node at equal total concurrency, and the shared limiter's accuracy.

Usage: python benchmarks/ray_overhead.py [--trials 8000] [--concurrency 256] [--workers 2]
                                         [--latency-ms 50] [--limiter-seconds 130] [--rpm 1200]
                                         [--cache] [--budget USD]

Both runs send the quickstart design over HTTP (``provider: openai``) to a
``trialgrid serve`` simulated server started as its own process on 127.0.0.1 (so
the server shares the machine's cores, as in the issue's measurement, but not the
client's GIL). Single-node is
``runner.run``; Ray mode is ``run_on_ray`` on a private local Ray with ``--workers``
workers splitting the same total concurrency. Ray start-up is excluded (the Ray
figure is the run itself, as the single-node one is).

``--cache`` gives both runs a response cache (each its own, empty: every request is a
lookup that misses, then a store — the cache actor's cost on Ray), then reruns each on
its filled cache: every trial a hit, no request sent, so the rerun rate is the cache's
lookups/s through Ray against the single-node path. ``--budget USD`` adds prices and a
budget never reached (the spend meter's cost on Ray: every worker reports its trials).

The limiter part runs a sweep with ``rpm`` shared by 4 workers through the limiter
actor for ``--limiter-seconds`` and reports, from the *server's* request log, the
most requests in any 60 s window (must be <= rpm) and the sustained rate over the
run as a fraction of rpm (the issue asks for >= 95%). Figures drift with machine
load; compare runs made side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
CELLS = 3 * 13 * 3  # models × triples × conditions of the quickstart
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost,::1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def sweep_file(tmp: Path, base_url: str, trials: int, concurrency: int, *, rpm: int | None = None,
               models: tuple[str, ...] = ("careful", "typical", "reckless"), name: str = "sweep.yaml",
               budget_usd: float | None = None) -> Path:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["models"] = [{"name": f"sim-{m}", "provider": "openai", "model": m, "base_url": base_url,
                       "api_key_env": None, "concurrency": concurrency,
                       **({"limits": {"rpm": rpm}} if rpm else {})} for m in models]
    cells = CELLS * len(models) // 3
    for probe in data["probes"]:
        probe["runs"] = max(1, math.ceil(trials / cells))
        for key in ("cases", "catalogue"):
            probe[key] = str(QUICKSTART.parent / probe[key])
    data["engine"] = {"concurrency": concurrency, "timeout_s": 120}
    if budget_usd is not None:
        data["prices"] = {f"sim-{m}": {"input": 1.0, "output": 5.0} for m in models}
        data["budget"] = {"usd": budget_usd}
    path = tmp / name
    path.write_text(yaml.safe_dump(data))
    return path


class Server:
    """``trialgrid serve --port 0`` in a child process; ``stats()`` reads its ``/stats``."""

    def __init__(self, latency_ms: float) -> None:
        self.latency_ms = latency_ms
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> Server:
        self.proc = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "serve", "--port", "0", "--latency-ms",
                                      str(self.latency_ms)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.url = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)  # type: ignore[union-attr]
        return self

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def stats(self, with_log: bool = False) -> dict:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return json.loads(opener.open(f"{self.url}/stats{'?log=1' if with_log else ''}", timeout=60).read())

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(30)


def max_in_window(times: np.ndarray, window: float) -> int:
    times = np.sort(times)
    ends = np.searchsorted(times, times + window, side="left")
    return int((ends - np.arange(len(times))).max()) if len(times) else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--limiter-seconds", type=float, default=130.0, help="0 skips the limiter measurement")
    parser.add_argument("--rpm", type=int, default=1200)
    parser.add_argument("--cache", action="store_true", help="a response cache on (then a cached rerun of each)")
    parser.add_argument("--budget", type=float, default=None, metavar="USD",
                        help="prices and a budget of USD (set it above the sweep's cost: metering, no stop)")
    args = parser.parse_args()

    import ray

    import runner
    from runner.config.sweep import load_sweep
    tmp = Path(tempfile.mkdtemp(prefix="tgb", dir="/tmp"))
    try:
        with Server(args.latency_ms) as server:
            loaded = load_sweep(sweep_file(tmp, server.base_url, args.trials, args.concurrency,
                                           budget_usd=args.budget))
            cache_of = {"local": tmp / "cache-local", "ray": tmp / "cache-ray"} if args.cache else {}
            started = time.perf_counter()
            local = runner.run(loaded, tmp / "local", quiet=True, cache=cache_of.get("local"))
            local_s = time.perf_counter() - started
            local_rate = local.stats.done / local_s

            ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, _node_ip_address="127.0.0.1",
                     _temp_dir=str(tmp / "r"), log_to_driver=False, configure_logging=False)
            try:
                result = runner.run(loaded, tmp / "ray", mode="ray", workers=args.workers, quiet=True, cache=cache_of.get("ray"))
                ray_rate = result.stats.done / result.elapsed_s
                extras = ", ".join(x for x in ("response cache" if args.cache else "",
                                               f"budget ${args.budget:g}" if args.budget is not None else "") if x)
                print(f"HTTP against trialgrid serve at {args.latency_ms:g} ms, total concurrency {args.concurrency}, "
                      f"{local.stats.done:,} trials{f' ({extras})' if extras else ''}:")
                print(f"  single-node: {local_rate:8,.0f} trials/s ({local_s:.1f} s; {local.status})")
                print(f"  ray, {args.workers} workers: {ray_rate:8,.0f} trials/s ({result.elapsed_s:.1f} s; "
                      f"{result.status}) = {ray_rate / local_rate:.1%} of single-node")
                if args.cache:
                    before = server.stats()["requests"]
                    started = time.perf_counter()
                    local_again = runner.run(loaded, tmp / "local-again", quiet=True, cache=cache_of["local"])
                    local_again_rate = local_again.stats.done / (time.perf_counter() - started)
                    ray_again = runner.run(loaded, tmp / "ray-again", mode="ray", workers=args.workers, quiet=True, cache=cache_of["ray"])
                    ray_again_rate = ray_again.stats.done / ray_again.elapsed_s
                    sent = server.stats()["requests"] - before
                    print(f"cached reruns (every trial a cache hit; requests sent by both: {sent}):")
                    print(f"  single-node: {local_again_rate:8,.0f} lookups/s")
                    print(f"  ray, {args.workers} workers: {ray_again_rate:8,.0f} lookups/s "
                          f"= {ray_again_rate / local_again_rate:.1%} of single-node")

                if args.limiter_seconds > 0:
                    window = 60.0
                    trials = int(args.rpm * args.limiter_seconds / window)
                    lim_sweep = load_sweep(sweep_file(tmp, server.base_url, trials, 64, rpm=args.rpm,
                                                      models=("careful",), name="limited.yaml"))
                    before = server.stats()["requests"]
                    lim = runner.run(lim_sweep, tmp / "limited", mode="ray", workers=4, quiet=True)
                    times = np.array(server.stats(with_log=True)["log"]["t"][before:])
                    span = times.max() - times.min()
                    peak = max_in_window(times, window)
                    sustained = len(times) / span * window
                    print(f"limiter: rpm {args.rpm} shared by 4 workers, {len(times):,} requests over {span:.0f} s "
                          f"({lim.counts}):")
                    print(f"  most requests in any {window:g} s window (server's count): {peak:,} "
                          f"({'within' if peak <= args.rpm else 'OVER'} the limit)")
                    print(f"  sustained: {sustained:,.0f} per minute = {sustained / args.rpm:.1%} of rpm")
            finally:
                ray.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""HTTP throughput by transport, end-to-end trials/s over HTTP, and rpm-limiter accuracy.

Usage:
  python benchmarks/http_throughput.py [--seconds 4] [--concurrency 16 64 256 1024]
  python benchmarks/http_throughput.py --rpm 600 --rpm-minutes 3     # sustained rpm check only

Starts ``trialgrid serve --port 0 --latency-ms 50`` in a subprocess on 127.0.0.1
(same machine, same cores as the client), then:

1. for each transport (``runner/providers/transport.py``: httpx's default pool,
   sharded httpx clients, httpx over the httpx-aiohttp transport) and each
   concurrency, runs misselection trials (probe → Agent → OpenAI wire format → HTTP
   → decode → score) for ``--seconds`` after a warm-up, and prints trials/s;
2. runs the quickstart sweep with ``provider: openai`` against the server through
   ``runner.run`` (sink included) at engine concurrency 256 with the default
   transport, and prints trials/s;
3. with ``--rpm N``: runs with ``limits: {rpm: N}`` for ``--rpm-minutes`` against the
   server, then reads the server's own request log and prints the largest count in
   any 60 s window and the sustained rate over the run's full windows.

Figures drift with machine load; compare rows made in one run. Nothing here leaves
127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from bisect import bisect_left
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "configs" / "quickstart.yaml"


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "serve", "--port", "0", "--latency-ms", str(latency_ms)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = line.split("serving the simulated agent on ", 1)[1].split()[0]
    return proc, url


def sweep_dict(base_url: str, runs: int, **model_extra: object) -> dict:
    data = yaml.safe_load(QUICKSTART.read_text())
    for probe in data["probes"]:
        probe["runs"] = runs
        for key in ("cases", "catalogue"):
            probe[key] = str(QUICKSTART.parent / probe[key])
    for m in data["models"]:
        m.update(provider="openai", base_url=base_url, api_key_env=None, **model_extra)
    return data


def load(tmp: Path, data: dict, name: str = "sweep.yaml"):  # type: ignore[no-untyped-def]
    from runner.config.sweep import load_sweep

    path = tmp / name
    path.write_text(yaml.safe_dump(data))
    return load_sweep(path)


async def transport_rate(loaded, base_url: str, transport: str, concurrency: int, seconds: float) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Trials/s of probe → provider → HTTP with ``concurrency`` in flight, for ``seconds``."""
    from runner.execution.grid import grid_of
    from runner.providers import Agent
    from runner.providers.openai_wire import OpenAIProvider
    from runner.providers.settings import Connection

    provider = OpenAIProvider(Connection("openai", base_url, None), transport=transport, max_connections=concurrency)
    probe = loaded.probes[0]
    models = {m.name: m.model_id for m in loaded.sweep.models}
    specs = iter(grid_of(loaded))
    done = errors = 0
    measuring = False
    stop_at = 0.0

    async def worker() -> None:
        nonlocal done, errors
        for spec in specs:
            if measuring and time.perf_counter() >= stop_at:
                return
            try:
                await probe.run(spec, Agent(provider, models[spec.model], {}))
            except Exception:
                errors += 1
            if measuring:
                done += 1

    # warm-up: open the connections
    warm = [asyncio.create_task(_n_trials(probe, provider, models, specs, 1)) for _ in range(concurrency)]
    await asyncio.gather(*warm)
    measuring = True
    started = time.perf_counter()
    stop_at = started + seconds
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await provider.aclose()
    return done / elapsed, errors


async def _n_trials(probe, provider, models, specs, n: int) -> None:  # type: ignore[no-untyped-def]
    from runner.providers import Agent

    for _ in range(n):
        spec = next(specs)
        try:
            await probe.run(spec, Agent(provider, models[spec.model], {}))
        except Exception:
            pass


def end_to_end(tmp: Path, base_url: str, concurrency: int) -> tuple[int, float]:
    import runner

    data = sweep_dict(base_url, runs=60, concurrency=concurrency)
    data["engine"] = {"concurrency": concurrency}
    loaded = load(tmp, data, "e2e.yaml")
    started = time.perf_counter()
    result = runner.run(loaded, tmp / "e2e-out", quiet=True)
    elapsed = time.perf_counter() - started
    return sum(result.counts.values()), elapsed


def rpm_check(tmp: Path, base_url: str, rpm: int, minutes: float) -> None:
    import runner

    data = sweep_dict(base_url, runs=max(1, int(rpm * minutes * 1.3 / (3 * 13 * 3)) + 1),
                      limits={"rpm": rpm}, concurrency=64)
    # one key for all three models: the limit is per key
    data["engine"] = {"concurrency": 64, "timeout_s": 3600}
    loaded = load(tmp, data, "rpm.yaml")
    print(f"\nrpm limiter: limits.rpm={rpm}, one key, {minutes:g} min against the server (no server-side limit)")

    import threading

    stop = threading.Event()

    def run() -> None:
        try:
            runner.run(loaded, tmp / "rpm-out", quiet=True)
        except Exception as exc:
            print("run failed:", exc)

    # run in a thread and stop by process exit after the time is up: the sweep is sized
    # to last longer than the check
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(minutes * 60)
    stop.set()
    with urllib.request.urlopen(base_url.rsplit("/v1", 1)[0] + "/stats?log=1", timeout=30) as resp:
        stats = json.loads(resp.read())
    times = sorted(stats["log"]["t"])
    window = 60.0
    worst = max(bisect_left(times, t + window) - i for i, t in enumerate(times))
    first, last = times[0], times[-1]
    full = int((last - first) // window)
    sustained = [bisect_left(times, first + (k + 1) * window) - bisect_left(times, first + k * window) for k in range(full)]
    print(f"  {len(times):,} requests over {last - first:.1f} s; largest count in any 60 s window: {worst} "
          f"(limit {rpm}: {'ok' if worst <= rpm else 'EXCEEDED'})")
    if sustained:
        mean = sum(sustained[1:] or sustained) / len(sustained[1:] or sustained)
        print(f"  consecutive 60 s windows: {sustained}; sustained (after the first) {mean:.1f}/min = "
              f"{100 * mean / rpm:.2f}% of the limit")
    os._exit(0)  # the sweep thread is still sending; the check is done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64, 256, 1024])
    parser.add_argument("--transports", nargs="+", default=["httpx", "sharded", "httpx-aiohttp", "httpx-transport", "aiohttp"])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--rpm", type=int, default=None, help="run only the sustained rpm check at this limit")
    parser.add_argument("--rpm-minutes", type=float, default=3.0)
    args = parser.parse_args()

    from runner.providers.transport import DEFAULT_TRANSPORT

    proc, url = start_server(args.latency_ms)
    base_url = url + "/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            if args.rpm:
                rpm_check(tmp, base_url, args.rpm, args.rpm_minutes)
                return
            loaded = load(tmp, sweep_dict(base_url, runs=400))
            print(f"trialgrid serve at {url}, {args.latency_ms:g} ms latency, same machine "
                  f"({os.cpu_count()} cores); misselection trials over the OpenAI wire format, "
                  f"{args.seconds:g} s per cell")
            header = f"{'transport':<14}" + "".join(f"{f'c={c}':>12}" for c in args.concurrency)
            print(header + "   (trials/s)")
            for transport in args.transports:
                cells = []
                for c in args.concurrency:
                    rate, errors = asyncio.run(transport_rate(loaded, base_url, transport, c, args.seconds))
                    cells.append(f"{rate:>12,.0f}" if not errors else f"{rate:>8,.0f}({errors})")
                mark = "  <- chosen (DEFAULT_TRANSPORT)" if transport == DEFAULT_TRANSPORT else ""
                print(f"{transport:<14}" + "".join(cells) + mark)
            n, elapsed = end_to_end(tmp, base_url, 256)
            print(f"end to end (runner.run, sink included, engine concurrency 256, {DEFAULT_TRANSPORT}): "
                  f"{n:,} trials in {elapsed:.1f} s = {n / elapsed:,.0f} trials/s")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()

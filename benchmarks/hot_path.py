"""The hot path's guard against drift: in-process and HTTP per-trial cost against bare loops, in one run.

Usage: python benchmarks/hot_path.py [--quick] [--trials 468000] [--seconds 8] [--concurrency 64 256 1024]
                                    [--baseline DIR]

Two ratios, each measured side by side in this one run so machine load falls on both sides:

1. **in process**: trialgrid's quickstart (grid → simulated agent → misselection scoring → Arrow)
   against the ``ungrounded`` package's bare mock loop, in trials per CPU-second, alternated
   (``benchmarks/engine_inprocess.py``'s ``compare_with_ungrounded``); plus the marginal µs of
   CPU per trialgrid trial (start-up cancels). Goal: ≥ 2.5×.
2. **over HTTP**: against ``trialgrid serve --latency-ms 50`` on 127.0.0.1, trialgrid's
   misselection trials through the OpenAI wire format at ``--concurrency`` in flight
   (``benchmarks/http_throughput.py``'s ``transport_rate``, the default transport) against a
   bare aiohttp loop posting the very bodies trialgrid sent to the same server at the same
   concurrency. Goal: ≥ 0.7 of the bare loop at 256 in flight (``--concurrency 64 256 1024``
   prints one comparison per level; the goal is judged at 256).

``--baseline DIR`` (a source tree of an earlier trialgrid, e.g. ``git archive COMMIT | tar -x -C DIR``)
adds a before/after line: the marginal µs of CPU per in-process trial of that tree and of this one,
each in its own fresh process (``PYTHONPATH``), alternated ``--rounds`` times, best of each.

Prints both ratios, µs of CPU per trial on each side, and exits 1 when either is below its goal
(2 when ``ungrounded`` is not installed). A benchmark, not a CI test: the figures depend on
the machine; quote them with the load average. ``--quick`` is a smoke-sized run (23,400
in-process trials, 3 s per HTTP side) whose figures are rougher.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_inprocess import compare_with_ungrounded, run_once
from http_throughput import load, start_server, sweep_dict, transport_rate

INPROCESS_GOAL = 2.5
HTTP_GOAL = 0.7


def _load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


async def record_bodies(loaded, base_url: str, n: int) -> list[bytes]:  # type: ignore[no-untyped-def]
    """The request bodies trialgrid sends for its first ``n`` trials (its client's ``post``, recorded)."""
    from runner.execution.grid import grid_of
    from runner.providers import Agent
    from runner.providers.openai_wire import OpenAIProvider
    from runner.providers.settings import Connection

    provider = OpenAIProvider(Connection("openai", base_url, None), max_connections=64)
    client = provider._client
    bodies: list[bytes] = []
    post = client.post

    async def recording_post(url: str, *, content: bytes, headers):  # type: ignore[no-untyped-def]
        bodies.append(content)
        return await post(url, content=content, headers=headers)

    client.post = recording_post  # type: ignore[method-assign]
    probe = loaded.probes[0]
    models = {m.name: m.model_id for m in loaded.sweep.models}
    specs = iter(grid_of(loaded))
    sem = asyncio.Semaphore(64)

    async def one(spec) -> None:  # type: ignore[no-untyped-def]
        async with sem:
            await probe.run(spec, Agent(provider, models[spec.model], {}))

    await asyncio.gather(*(one(next(specs)) for _ in range(n)))
    await provider.aclose()
    return bodies


async def bare_rate(url: str, bodies: list[bytes], concurrency: int, seconds: float) -> tuple[float, int]:
    """Requests/s of a bare aiohttp loop posting ``bodies`` round-robin and reading each JSON reply."""
    import aiohttp

    done = errors = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    headers = {"content-type": "application/json"}
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        async def send(body: bytes) -> None:
            nonlocal errors
            async with session.post(url, data=body, headers=headers) as resp:
                await resp.json()
                errors += resp.status != 200

        await asyncio.gather(*(send(bodies[i % len(bodies)]) for i in range(concurrency)))  # open the connections
        stop_at = time.perf_counter() + seconds
        started = time.perf_counter()

        async def worker(k: int) -> None:
            nonlocal done
            i = k
            while time.perf_counter() < stop_at:
                await send(bodies[i % len(bodies)])
                i += concurrency
                done += 1

        await asyncio.gather(*(worker(k) for k in range(concurrency)))
        elapsed = time.perf_counter() - started
    return done / elapsed, errors


def _timed(coro_fn, *args):  # type: ignore[no-untyped-def]
    """(result, CPU seconds of this process) of ``asyncio.run(coro_fn(*args))``."""
    cpu = time.process_time()
    out = asyncio.run(coro_fn(*args))
    return out, time.process_time() - cpu


def http_comparison(concurrency: int, seconds: float, latency_ms: float, rounds: int) -> dict:
    """trialgrid's HTTP trials against the bare loop on one server, alternated ``rounds`` times; best of each."""
    from runner.providers.transport import DEFAULT_TRANSPORT

    proc, url = start_server(latency_ms)
    base_url = url + "/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            loaded = load(Path(tmp_name), sweep_dict(base_url, runs=2_000))
            bodies = asyncio.run(record_bodies(loaded, base_url, 1_000))
            ours, theirs = [], []
            for _ in range(rounds):  # alternated, so drifting load falls on both sides
                # CPU per trial counts the warm-up's ``concurrency`` trials too: each side's CPU is
                # measured around its whole run, set-up and connection opening included
                (rate, errs), cpu = _timed(transport_rate, loaded, base_url, DEFAULT_TRANSPORT, concurrency, seconds)
                ours.append({"rate": rate, "errors": errs, "cpu_us": 1e6 * cpu / (rate * seconds + concurrency)})
                (rate, errs), cpu = _timed(bare_rate, base_url + "/chat/completions", bodies, concurrency, seconds)
                theirs.append({"rate": rate, "errors": errs, "cpu_us": 1e6 * cpu / (rate * seconds + concurrency)})
    finally:
        proc.terminate()
        proc.wait(10)
    best_ours = max(ours, key=lambda r: r["rate"])
    best_theirs = max(theirs, key=lambda r: r["rate"])
    return {"trialgrid": best_ours, "bare": best_theirs, "ratio": best_ours["rate"] / best_theirs["rate"],
            "bodies": len(bodies)}


def marginal_child(trials: int) -> dict:
    """In this process: warm up, then the marginal CPU per trial between a run of ``trials`` and one of a quarter."""
    run_once(2_000)
    small, big = run_once(max(1, trials // 4)), run_once(trials)
    return {"marginal_cpu_us": 1e6 * (big["cpu_s"] - small["cpu_s"]) / max(1, big["trials"] - small["trials"]),
            "trials_per_cpu_s": big["trials_per_cpu_s"], "trials": big["trials"]}


def before_after(baseline: Path, trials: int, rounds: int) -> tuple[dict, dict]:
    """The marginal CPU per trial of the tree at ``baseline`` and of this one, fresh processes, alternated."""
    here = Path(__file__).resolve().parent.parent
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(rounds):
        for side, tree in (("before", baseline), ("after", here)):
            env = {**os.environ, "PYTHONPATH": str(tree)}
            out = subprocess.run([sys.executable, __file__, "--child-marginal", str(trials)], env=env,
                                 capture_output=True, text=True, check=True)
            runs[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = {side: min(rs, key=lambda r: r["marginal_cpu_us"]) for side, rs in runs.items()}
    return best["before"], best["after"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke-sized run: 23,400 trials, 3 s per HTTP side")
    parser.add_argument("--trials", type=int, default=None, help="in-process trials per run (default 468,000)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of each side (best round kept)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per HTTP side and round (default 8)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[256],
                        help="requests in flight over HTTP, one comparison each (the goal is judged at 256)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the server's simulated latency")
    parser.add_argument("--skip-http", action="store_true", help="the in-process ratio only")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a source tree of an earlier trialgrid: print its µs CPU/trial beside this tree's")
    parser.add_argument("--child-marginal", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_marginal:
        import runner

        print(json.dumps({**marginal_child(args.child_marginal), "tree": str(Path(runner.__file__).parent.parent)}))
        return 0
    trials = args.trials or (23_400 if args.quick else 468_000)
    seconds = args.seconds or (3.0 if args.quick else 8.0)

    try:
        import ungrounded  # noqa: F401
    except ImportError:
        print("ungrounded is not installed: pip install ungrounded (a benchmark-only comparison)", file=sys.stderr)
        return 2

    print(f"hot path, {os.cpu_count()} cores, load average {_load_average()} at start")
    ok = True
    c = compare_with_ungrounded(trials, rounds=args.rounds)
    t, u = c["trialgrid"], c["ungrounded"]
    ok &= c["cpu_ratio"] >= INPROCESS_GOAL
    print(f"in process, {t['trials']:,} trials (best of {args.rounds}, alternated):")
    print(f"  trialgrid  {t['trials_per_cpu_s']:>9,.0f} trials/CPU-s ({1e6 / t['trials_per_cpu_s']:.1f} µs CPU/trial, "
          f"{t['trials_per_s']:,.0f}/s wall); marginal {c['marginal_cpu_us']:.1f} µs CPU/trial")
    print(f"  ungrounded {u['trials_per_cpu_s']:>9,.0f} trials/CPU-s ({1e6 / u['trials_per_cpu_s']:.1f} µs CPU/trial, "
          f"{u['trials_per_s']:,.0f}/s wall), {u['trials']:,} trials of its mock loop")
    print(f"  ratio {c['cpu_ratio']:.2f}× per CPU-second ({c['wall_ratio']:.2f}× wall); goal ≥ {INPROCESS_GOAL}× "
          f"{'ok' if c['cpu_ratio'] >= INPROCESS_GOAL else 'BELOW'}")
    if args.baseline is not None:
        before, after = before_after(args.baseline.resolve(), trials, args.rounds)
        print(f"before/after, marginal µs CPU per in-process trial (fresh process each, best of {args.rounds}, "
              f"alternated; load average {_load_average()}):")
        for side, r in (("before", before), ("after", after)):
            print(f"  {side:<6} {r['marginal_cpu_us']:6.1f} µs  ({r['trials_per_cpu_s']:,.0f} trials/CPU-s over "
                  f"{r['trials']:,} trials)  {r['tree']}")
        print(f"  after / before {after['marginal_cpu_us'] / before['marginal_cpu_us']:.2f}")
    if not args.skip_http:
        # the goal is set at c=256; other concurrencies are printed beside it (checked only when 256 is not asked)
        goal_at = [c for c in args.concurrency if c == 256] or args.concurrency
        for concurrency in args.concurrency:
            h = http_comparison(concurrency, seconds, args.latency_ms, args.rounds)
            judged = concurrency in goal_at
            ok &= h["ratio"] >= HTTP_GOAL or not judged
            print(f"over HTTP, c={concurrency}, trialgrid serve --latency-ms {args.latency_ms:g}, {seconds:g} s per side "
                  f"(best of {args.rounds}, alternated):")
            for name, r in (("trialgrid", h["trialgrid"]), ("bare aiohttp", h["bare"])):
                errs = f", {r['errors']} errors" if r["errors"] else ""
                print(f"  {name:<12} {r['rate']:>7,.0f} trials/s ({r['cpu_us']:.0f} µs client CPU per trial{errs})")
            verdict = ("ok" if h["ratio"] >= HTTP_GOAL else "BELOW") if judged else "not judged"
            print(f"  ratio {h['ratio']:.2f} of the bare loop ({h['bodies']:,} recorded bodies); goal ≥ {HTTP_GOAL} "
                  f"{verdict}; client CPU per trial {h['bare']['cpu_us'] / h['trialgrid']['cpu_us']:.2f} of "
                  "trialgrid's is the bare loop's (steadier under load: a loaded server moves the rates)")
    print(f"load average {_load_average()} at end; {'all goals met' if ok else 'BELOW GOAL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

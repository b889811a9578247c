"""How fast ``trialgrid view`` answers on large outputs, as a user sees it, and how much memory its server holds.

Usage: python benchmarks/view.py [--output OUT …] [--trials 100000 1000000] [--cache DIR] [--rounds N] [--live N]

Each output is either given (``--output``: a finished output, e.g. one ``benchmarks/scale.py`` built; it is only
read) or built once by the engine into ``--cache`` (the quickstart design, ``provider: sim``, its ``runs:`` raised
to reach ``--trials``). For each, ``trialgrid view OUT --port N`` is launched as its own process, ``--rounds``
times, and timed from the launch the way a browser sees it (connecting until the port answers):

- the landing page: ``/``, its script and stylesheet, then the runs (``api/runs``), as the page asks them;
- the trial list (``#/run/0``): the page's files, then its rows, its count and the run's filter columns, asked at
  once as the page asks them (the rows are drawn first; "the first page" is the rows and the count);

then, on the last round's server: a filtered page (a model and an outcome), the same with a text search, its
next page, a sorted page, a page in the middle, a trial's detail (the first asked, then others) and the rates
(the report's analysis; the warm-up computes it in the background). Every request is a fresh connection and the
whole answer is read. The server's memory is sampled every 10 ms from ``/proc``: its anonymous memory (what it
allocated) and its file pages (the parts' pages a query maps, shared with the page cache), each at its peak, and
``VmHWM`` (the most it ever held resident). A fresh server asked for the rates first shows the time to the
rates page and its peak.

``--live N``: a copy of the first output that is still being written (manifest ``running``), made in ``/tmp``:
a writer process appends the output's rows through a ``TrialSink`` (its open part, as a run writes), N rows
before the viewer starts, then a batch of 4,096 rows every second; the list page is asked as above, then its
count polled while the writer goes on, and the server's memory sampled. The original output is never written.

Figures, not a test (the targets, on a 1M-trial output: the first page ≤ 1 s after start, a filtered page
≤ 2 s, a detail ≤ 200 ms, the server's RSS bounded whatever the output's size).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
CELLS = 3 * 13 * 3  # models × triples × conditions of the quickstart
RATES_TIMEOUT = 900.0
PAGE = "offset=0&limit=50"
FILTER = "f.model=sim-reckless&f.decoy_called=true"
SEARCH = "f.decoy_called=true&q=quorbis"


def build(cache: Path, trials: int) -> Path:
    """The quickstart scaled to ``trials`` (at least), run by the engine into ``cache/out-N`` unless already there."""
    import runner
    from runner.config.sweep import load_sweep
    from runner.core.manifest import read_manifest

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
    runner.run(load_sweep(path), out, quiet=True)
    print(f"  built {out} in {time.perf_counter() - started:.0f} s")
    return out


def _status(pid: int) -> dict[str, int]:
    """The memory lines of ``/proc/PID/status`` in MiB (RssAnon, RssFile, VmRSS, VmHWM)."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("RssAnon", "RssFile", "VmRSS", "VmHWM"):
                found[key] = int(rest.split()[0]) // 1024
    return found


@dataclass
class Server:
    """A ``trialgrid view`` process, its URL and its memory sampled every 10 ms (the peaks since ``reset``)."""

    proc: subprocess.Popen[str]
    base: str
    launched: float
    peaks: dict[str, int] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        while not self.stop.is_set():
            try:
                now = _status(self.proc.pid)
            except OSError:
                return
            for key, value in now.items():
                self.peaks[key] = max(self.peaks.get(key, 0), value)
            time.sleep(0.01)

    def reset(self) -> None:
        self.peaks.clear()

    def memory(self) -> str:
        now = _status(self.proc.pid)
        return (f"now {now['RssAnon']} anon + {now['RssFile']} file MiB; peak anon {self.peaks.get('RssAnon', 0)}, "
                f"file {self.peaks.get('RssFile', 0)}, VmHWM {now['VmHWM']} MiB")

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def launched(out: Path) -> Iterator[Server]:
    """``trialgrid view OUT --port N`` as its own process, connected to as soon as it accepts (a user opening the
    URL); the clock starts at the launch."""
    env = {**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    port = _free_port()
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "runner", "view", str(out), "--port", str(port)],
                            stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, text=True, env=env)
    server = Server(proc, f"http://127.0.0.1:{port}/", started)
    sampler = threading.Thread(target=server.sample, daemon=True)
    sampler.start()
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"trialgrid view exited with {proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.005)
        yield server
    finally:
        server.stop.set()
        proc.terminate()
        proc.wait(timeout=30)
        sampler.join(timeout=5)


def get(url: str, timeout: float = 300) -> tuple[float, Any]:
    """(seconds to the whole answer, the answer: JSON decoded, else its bytes)."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body = response.read()
        kind = response.headers.get("Content-Type", "")
    took = time.perf_counter() - started
    return took, json.loads(body) if kind.startswith("application/json") else body


def at_once(calls: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = {k: pool.submit(f) for k, f in calls.items()}
        return {k: f.result() for k, f in futures.items()}


def since(server: Server, fn: Callable[[], Any]) -> Callable[[], tuple[float, float]]:
    """``fn`` run, then (the seconds from the server's launch, the CPU seconds the server had used by then)."""
    def run() -> tuple[float, float]:
        fn()
        return time.perf_counter() - server.launched, server.cpu()
    return run


def page_files(server: Server) -> None:
    for path in ("", "static/app.js", "static/app.css"):
        get(server.base + path)


def landing(out: Path) -> tuple[float, float]:
    """Launch → the runs page answered (its files, then ``api/runs``): (seconds, the server's CPU seconds)."""
    with launched(out) as server:
        page_files(server)
        return since(server, lambda: get(server.base + "api/runs"))()


def list_page(server: Server) -> dict[str, tuple[float, float]]:
    """What the trial list asks, at once: the rows (count=0), the count, the run with its filter columns; each
    answer's time from the launch."""
    page_files(server)
    api = server.base + "api/runs/0"
    return at_once({"rows": since(server, lambda: get(f"{api}/trials?{PAGE}&count=0")),
                    "count": since(server, lambda: get(f"{api}/count")),
                    "columns": since(server, lambda: get(api))})


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def measure(out: Path, rounds: int) -> None:
    size = sum(p.stat().st_size for p in (out / "trials").glob("*.arrow*")) / 2**20
    marks = [landing(out) for _ in range(rounds)]
    print(f"  {size:,.0f} MiB of parts; load average {os.getloadavg()[0]:.1f}")
    print(f"  landing page (runs), launch → answered   median {median([m[0] for m in marks]) * 1000:6.0f} ms "
          f"(min {min(m[0] for m in marks) * 1000:.0f}), {median([m[1] for m in marks]):.2f} CPU s of the server "
          f"({rounds} launches)")
    lists: list[dict[str, tuple[float, float]]] = []
    for i in range(rounds):
        with launched(out) as server:
            lists.append(list_page(server))
            if i < rounds - 1:
                continue

            def ms(key: str) -> float:
                return median([x[key][0] for x in lists]) * 1000

            print(f"  trial list, launch → rows / count / filter columns   median {ms('rows'):.0f} / {ms('count'):.0f}"
                  f" / {ms('columns'):.0f} ms (min rows {min(x['rows'][0] for x in lists) * 1000:.0f}); the server's "
                  f"CPU at the rows {median([x['rows'][1] for x in lists]):.2f} s; load average "
                  f"{os.getloadavg()[0]:.1f}")
            print(f"    server memory after the first page: {server.memory()}", flush=True)
            rest(server)


def rest(server: Server) -> None:
    api = server.base + "api/runs/0"
    total = get(f"{api}/count")[1]["total"]

    def pair(query: str) -> tuple[float, float, dict[str, Any], int]:
        rows, page = get(f"{api}/trials?{query}&{PAGE}&count=0")
        counted, count = get(f"{api}/count?{query}")
        return rows, counted, page, count["total"]

    rows, counted, fpage, n = pair(FILTER)
    print(f"  filtered page (a model and an outcome)  rows {rows * 1000:6.0f} ms, count {counted * 1000:.0f} ms "
          f"({n:,} of {total:,} trials)")
    rows, counted, _, n = pair(SEARCH)
    print(f"  … with a text search                   rows {rows * 1000:6.0f} ms, count {counted * 1000:.0f} ms "
          f"({n:,} trials)")
    took, _ = get(f"{api}/trials?{SEARCH}&offset=50&limit=50")
    print(f"  … its next page, with its count        {took * 1000:6.0f} ms")
    took, _ = get(f"{api}/trials?sort=latency_ms&desc=1&{PAGE}&count=0")
    print(f"  sorted page (latency, descending)      {took * 1000:6.0f} ms")
    took, _ = get(f"{api}/trials?offset={total // 2}&limit=50&count=0")
    print(f"  a page in the middle                   {took * 1000:6.0f} ms")
    ids = [r["trial_id"] for r in fpage["rows"][:6]]
    details = [get(f"{api}/trials/{tid}?{FILTER}&pos={i}")[0] for i, tid in enumerate(ids)]
    print(f"  trial detail: the first / the next ones (max of {len(details) - 1})  {details[0] * 1000:.0f} / "
          f"{max(details[1:]) * 1000:.0f} ms")
    print(f"    server memory before the rates: {server.memory()}", flush=True)
    try:
        first, _ = get(f"{api}/rates", timeout=RATES_TIMEOUT)
        again, _ = get(f"{api}/rates")
        print(f"  rates: first / again                   {first * 1000:6.0f} / {again * 1000:.0f} ms "
              f"({time.perf_counter() - server.launched:.1f} s after the launch)")
    except TimeoutError:
        print(f"  rates                                  no answer in {RATES_TIMEOUT:.0f} s")
    print(f"    server memory after the rates: {server.memory()}; {server.cpu():.1f} CPU s in all", flush=True)


def rates_alone(out: Path) -> None:
    """A fresh server asked for the rates as soon as it listens, and nothing else."""
    with launched(out) as server:
        try:
            get(server.base + "api/runs/0/rates", timeout=RATES_TIMEOUT)
            took = f"{time.perf_counter() - server.launched:.1f} s after the launch"
        except TimeoutError:
            took = f"no answer in {RATES_TIMEOUT:.0f} s"
        print(f"  rates asked first (a fresh server): {took} ({server.cpu():.1f} CPU s); {server.memory()}; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)


# -- a live output: a writer appending through a TrialSink, the viewer reading it ---------------------------------
def _writer(source: str, live: str, before: int, every: float) -> None:
    """(A process of its own.) Append ``source``'s rows to ``live`` through a ``TrialSink``: ``before`` rows at
    once, then one batch a second until killed."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from runner.output.sink import TrialSink

    part = sorted(Path(source, "trials").glob("*.arrow"), key=lambda p: p.stat().st_size)[-1]
    with pa.OSFile(str(part)) as f:
        reader = ipc.open_file(f)
        schema = reader.schema
        sink = TrialSink(Path(live), schema, batch_rows=4096, part_rows=10_000_000)
        written = 0
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            if batch.num_rows == 0:
                continue  # the seal
            sink.write_batch(pa.RecordBatch.from_arrays(batch.columns, schema=schema))
            written += batch.num_rows
            if written >= before:
                print(f"written {written}", flush=True)
                time.sleep(every)


def live(out: Path, rows: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="view-live-"))
    try:
        dest = tmp / "out"
        (dest / "trials").mkdir(parents=True)
        manifest = json.loads((out / "manifest.json").read_text())
        manifest["status"] = "running"
        (dest / "manifest.json").write_text(json.dumps(manifest))
        writer = subprocess.Popen([sys.executable, __file__, "--write", str(out), str(dest), str(rows)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert writer.stdout is not None
            line = writer.stdout.readline()
            print(f"  live copy in {dest}: {line.strip()} rows in its open part before the viewer starts")
            with launched(dest) as server:
                marks = list_page(server)
                print(f"  trial list, launch → rows / count / filter columns  {marks['rows'][0] * 1000:.0f} / "
                      f"{marks['count'][0] * 1000:.0f} / {marks['columns'][0] * 1000:.0f} ms ({marks['rows'][1]:.2f} "
                      f"CPU s at the rows); load average {os.getloadavg()[0]:.1f}")
                print(f"    server memory after the first page: {server.memory()}", flush=True)
                api = server.base + "api/runs/0"
                counts = []
                for _ in range(6):  # what a live page polls (every 1.5 s): the rows and the count
                    time.sleep(1.5)
                    took, _ = get(f"{api}/trials?{PAGE}&count=0")
                    counted, answer = get(f"{api}/count")
                    counts.append((answer["total"], took, counted))
                print("  polled (count: rows / count ms): " + ", ".join(f"{n:,}: {a * 1000:.0f} / {b * 1000:.0f}"
                                                                        for n, a, b in counts))
                took_rows, _ = get(f"{api}/trials?{FILTER}&{PAGE}&count=0")
                took_count, answer = get(f"{api}/count?{FILTER}")
                print(f"  filtered page while live: rows {took_rows * 1000:.0f} ms, count {took_count * 1000:.0f} ms "
                      f"({answer['total']:,} trials)")
                print(f"    server memory while live: {server.memory()}; {server.cpu():.1f} CPU s", flush=True)
        finally:
            writer.kill()
            writer.wait(timeout=30)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    if sys.argv[1:2] == ["--write"]:
        _writer(sys.argv[2], sys.argv[3], int(sys.argv[4]), 1.0)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", type=Path, nargs="+", help="finished outputs to view (only read)")
    parser.add_argument("--trials", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "trialgrid-view-bench")
    parser.add_argument("--rounds", type=int, default=3, help="launches per figure of a first page")
    parser.add_argument("--live", type=int, metavar="ROWS", help="also view a live copy of the last output, its "
                                                                 "open part holding ROWS rows at the start")
    parser.add_argument("--skip-rates-alone", action="store_true")
    parser.add_argument("--only-live", action="store_true", help="measure the live copy only")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    outs = args.output or [build(args.cache, n) for n in args.trials]
    for out in [] if args.only_live else outs:
        trials = json.loads((out / "manifest.json").read_text()).get("trials_total") or 0
        print(f"{out} ({trials:,} trials planned)")
        measure(out, args.rounds)
        if not args.skip_rates_alone:
            rates_alone(out)
    if args.live:
        live(outs[-1], args.live)


if __name__ == "__main__":
    main()

"""The live trace audit, end to end: N tool calls exported over OTLP/HTTP to ``trialgrid audit --listen``.

Usage:

    python benchmarks/trace_receiver.py --calls 100000 1000000
    python benchmarks/trace_receiver.py --calls 100000 --protobuf

For each size it generates the spans of ``benchmarks/trace_import.py`` (OTel GenAI ``chat`` spans,
conversations of 1–8 calls, each later call with the whole history before it; 512 spans an export request,
the SDK's batch size), starts the receiver exactly as a user would (``python -m runner audit --listen 0
--out DIR``, its own process), and POSTs every request in turn, as one exporter does (JSON, or with
``--protobuf`` the same requests encoded as the SDK's exporter sends them, needing the ``otlp`` extra). Each
request is acknowledged only once its calls are written, synced, audited and checkpointed, so the figures are
what an exporter waits for. Printed per size: calls/s by wall clock, calls per CPU-second of the receiver
(from ``wait4``), its peak RSS, and the bytes it wrote, beside the load average; then a check that the
receiver audited every call once (``listen.json`` against the calls sent).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_import import generate  # the one generator of the trace benchmarks' spans

ROOT = Path(__file__).resolve().parents[1]
_URL = re.compile(r"http://127\.0\.0\.1:\d+/v1/traces")


def _bodies(src: Path, protobuf: bool) -> Iterator[bytes]:
    """The export requests, one at a time (the driver holds one, not the gigabytes of a million calls)."""
    if protobuf:
        from google.protobuf.json_format import Parse
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    with src.open("rb") as fh:
        for line in fh:
            yield Parse(line, ExportTraceServiceRequest()).SerializeToString() if protobuf else line


def _peak_rss_mib(pid: int) -> float:
    """The process's own high-water mark (``VmHWM``): ``wait4``'s ``ru_maxrss`` of a child starts at its
    parent's, so it would report the driver's peak instead."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def receive(bodies: Iterator[bytes], out: Path, protobuf: bool) -> dict[str, float]:
    """POST ``bodies`` to a fresh receiver writing ``out``; wall and CPU seconds, peak RSS (MiB), its checkpoint."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "runner", "audit", "--listen", "0", "--out", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=out.parent)
    assert proc.stdout is not None
    url = None
    while url is None:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the receiver did not start")
        if m := _URL.search(line):
            url = m.group(0)
    headers = {"Content-Type": "application/x-protobuf" if protobuf else "application/json"}
    start = time.perf_counter()
    with httpx.Client(timeout=120) as client:
        for body in bodies:
            answer = client.post(url, content=body, headers=headers)
            if answer.status_code != 200:
                raise SystemExit(f"the receiver answered {answer.status_code}: {answer.text[:300]}")
    wall = time.perf_counter() - start
    rss = _peak_rss_mib(proc.pid)
    proc.send_signal(signal.SIGINT)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"the receiver failed: {proc.stdout.read()}")
    state = json.loads((out / "listen.json").read_text())
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": rss, "requests": state["requests"],
            "calls": state["calls"], "findings": state["findings"],
            "bytes": sum(p.stat().st_size for p in out.iterdir())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, nargs="+", default=[100_000])
    ap.add_argument("--protobuf", action="store_true", help="send protobuf, as the SDKs' exporter does")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trialgrid-receiver-") as tmp:
        for n in args.calls:
            src = Path(tmp) / f"spans-{n}.otlp.jsonl"
            generate(src, n)
            out = Path(tmp) / f"live-{n}"
            r = receive(_bodies(src, args.protobuf), out, args.protobuf)
            print(f"{n:>9,} calls, {r['requests']:,} requests ({'protobuf' if args.protobuf else 'JSON'}): "
                  f"{n / r['wall']:>6,.0f} calls/s [{n / r['cpu']:>6,.0f} per CPU-second of the receiver; "
                  f"{r['cpu'] / n * 1e6:.0f} µs a call]  peak RSS {r['rss']:,.0f} MiB  wrote {r['bytes'] / 2**20:,.0f} "
                  f"MiB  {r['findings']:,} findings  load {os.getloadavg()[0]:.1f}", flush=True)
            if r["calls"] != n:
                raise SystemExit(f"the receiver audited {r['calls']:,} calls of {n:,}")
            shutil.rmtree(out)
            src.unlink()


if __name__ == "__main__":
    main()

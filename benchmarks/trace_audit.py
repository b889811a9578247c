"""Baseline-only audit of gold-less imported traces: calls/s and peak RSS at two sizes.

The audit alone, over traces already imported; the whole pipeline a user runs (OTLP JSON → ``import traces``
→ ``audit``) is ``benchmarks/trace_import.py``, whose figures are the issue's.

Writes N generated traces in the import contract's shape (one call each, ``gold_phantoms`` null, a
``source`` with trace / span / conversation / call ids; conversations of 1–8 calls whose later calls see
the earlier tool results) and runs ``trialgrid audit`` on them in a fresh process per size, so each size's
peak RSS is its own; then the report's flag rates over the written table (timed apart). Prints calls/s
(generation excluded), calls per CPU-second (driver and workers: less sensitive to a loaded machine than
wall time), peak RSS of the largest process (and the driver's before the report) and output bytes, with the load
average. The report reads the counts the audit summed while auditing (``counts.parquet``, ``read_counts``);
``AUDIT_REPORT=table`` reads the whole field table instead, as it did first.

    python benchmarks/trace_audit.py --sizes 100000 1000000
    python benchmarks/trace_audit.py --report-only --sizes 100000 1000000

``--before REV`` runs the audit of each size twice more, side by side with the working tree: once with the
``runner`` package of git revision REV (``git archive``, put first on ``PYTHONPATH``), once with the working tree,
alternated ``--rounds`` times, and prints both figures and their ratio (the grounding rule's speed):

    python benchmarks/trace_audit.py --sizes 100000 --before main --rounds 2

``--report-only`` skips the audit: it writes a field table of N calls directly (the audit's schema, four
fields per call, conversations of 1–8 calls, a baseline flag per field drawn at random) and times the report's
flag rates over it three ways, each in a fresh process, so each peak RSS is its own: the whole table
(``read_fields``, as first), polars' streaming group_by of the table to the counts (as ``read_counts`` did
before the audit summed them), and ``ClusterCounts`` summing the table's row groups (what the audit does as it
writes them; ``read_counts`` of a directory without ``counts.parquet``). The three give the same rates
(checked: the figures line says so).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

_TOOLS = ("get_order", "refund_order", "send_email", "schedule_call")


def conversations(n: int, seed: int = 7) -> Iterator[tuple[int, int, int, str, str, dict[str, object]]]:
    """``n`` calls in conversations of 1–8 calls: (conversation, turn, call index, user turn, tool, arguments).
    One generator for both trace benchmarks (this one's JSON lines, ``trace_import.py``'s OTLP spans)."""
    rng = random.Random(seed)
    i = conv = 0
    while i < n:
        conv += 1
        order = f"ORD-{rng.randrange(10**6):06d}"
        email = f"user{rng.randrange(10**5)}@example.com"
        user = f"Hi, I need help with order {order}. My email is {email}."
        for turn in range(rng.randint(1, 8)):
            if i >= n:
                break
            args = {"order_id": order if rng.random() < 0.9 else f"ORD-{rng.randrange(10**6):06d}",
                    "email": email if rng.random() < 0.8 else "someone@example.com",
                    "amount": round(rng.uniform(5, 200), 2), "note": "customer request"}
            yield conv, turn, i, user, _TOOLS[turn % len(_TOOLS)], args
            i += 1


def write_traces(path: Path, n: int, seed: int = 7) -> None:
    """``n`` gold-less traces, one call each, as JSON lines."""
    results: list[dict[str, object]] = []
    last = 0
    with path.open("w", encoding="utf-8") as fh:
        for conv, turn, i, user, tool, args in conversations(n, seed):
            if conv != last:
                results, last = [], conv
            trace = {"id": f"c{conv}-t{turn}", "context": {"system": "You are the support assistant.",
                                                           "user": [user], "tool_results": list(results)},
                     "calls": [{"tool": tool, "args": args}], "gold_phantoms": None,
                     "source": {"format": "otel-genai", "file": "gen.json", "record": i,
                                "trace_id": f"{conv:032x}", "span_id": f"{i:016x}",
                                "conversation_id": f"conv-{conv}", "call_id": f"call_{i}"}}
            fh.write(json.dumps(trace) + "\n")
            results.append({"tool": tool, "result": {"ok": True, "total": args["amount"]}})


def _child(traces: str, out: str) -> None:
    from runner.probes.phantom.audit import audit_files

    start = time.perf_counter()
    summary = audit_files([Path(traces)], Path(out), workers=int(os.environ.get("AUDIT_WORKERS", "2")))
    elapsed = time.perf_counter() - start
    from runner.probes.phantom.audit import VIEW_COLUMNS, read_counts, read_fields
    from runner.probes.phantom.report import flag_rates

    audit_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    if os.environ.get("AUDIT_REPORT") == "table":  # the whole field table, as before the per-conversation counts
        flag_rates(read_fields(Path(out), VIEW_COLUMNS), seed=0)
    else:
        flag_rates(read_counts(Path(out)), seed=0)
    report_s = time.perf_counter() - start
    size = sum(p.stat().st_size for p in Path(out).iterdir())
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = max(me.ru_maxrss, kids.ru_maxrss) / 1024  # the largest single process (the driver or a worker)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    print(json.dumps({"calls": summary.calls, "fields": summary.fields, "seconds": elapsed, "cpu_s": cpu, "report_s": report_s,
                      "calls_per_s": summary.calls / elapsed, "peak_rss_mb": rss, "audit_rss_mb": audit_rss, "output_bytes": size}))


def write_table(path: Path, n: int, seed: int = 7) -> None:
    """A field table of ``n`` calls (four fields each) in the audit's schema, written in row groups."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from runner.probes.phantom.audit import SCHEMA

    rng = np.random.default_rng(seed)
    step = 50_000
    with pq.ParquetWriter(path, SCHEMA, compression="zstd") as writer:
        conv = 0
        for lo in range(0, n, step):
            k = min(step, n - lo)
            sizes = rng.integers(1, 9, size=k)  # conversations of 1–8 calls, cut at k calls
            conv_of_call = (conv + np.repeat(np.arange(k), sizes))[:k]
            conv = int(conv_of_call[-1]) + 1
            calls = np.arange(lo, lo + k)
            rows = 4 * k
            tool_i = calls % len(_TOOLS)
            arg = np.tile(np.array(["order_id", "email", "amount", "note"]), k)
            tool = np.repeat(np.array(_TOOLS)[tool_i], 4)
            call_s = np.repeat(calls, 4).astype(str)
            cols = {
                "model": pa.array([""] * rows), "condition": pa.array(["results_visible"] * rows),
                "run": pa.array(np.zeros(rows, np.int32)), "trace": pa.array(np.char.add("t", call_s)),
                "conversation": pa.array(np.char.add("c:conv-", np.repeat(conv_of_call, 4).astype(str))),
                "tool": pa.array(tool), "arg": pa.array(arg), "field": pa.array(np.char.add(np.char.add(tool, "."), arg)),
                "value": pa.array(np.char.add("v", call_s)), "baseline": pa.array(rng.random(rows) < 0.15),
                "auditor": pa.nulls(rows, pa.bool_()), "gold": pa.nulls(rows, pa.bool_()),
                "file": pa.array(np.zeros(rows, np.int32)), "line": pa.array(np.repeat(calls + 1, 4)),
                "source_format": pa.array(["otel-genai"] * rows), "source_file": pa.array(["gen.json"] * rows),
                "source_record": pa.array(np.repeat(calls, 4)), "trace_id": pa.array(np.char.add("T", call_s)),
                "span_id": pa.array(np.char.add("S", call_s)), "call_id": pa.array(np.char.add("call_", call_s)),
            }
            writer.write_batch(pa.RecordBatch.from_pydict(cols, schema=SCHEMA))


def _group_by_counts(directory: Path) -> object:
    """The counts as ``read_counts`` made them before the audit summed them: polars' streaming group_by."""
    import polars as pl

    from runner.probes.phantom.audit import COUNT_KEYS, FIELDS_FILE
    from runner.probes.phantom.report import COUNT

    lazy = pl.scan_parquet(directory / FIELDS_FILE).group_by(list(COUNT_KEYS)).agg(pl.len().cast(pl.Int64).alias(COUNT))
    return lazy.collect(engine="streaming").with_columns(pl.col("conversation").rank("dense").cast(pl.Int64))


_HOWS = ("table", "group_by", "counts")


def _report_child(directory: str, how: str) -> None:
    from runner.probes.phantom.audit import VIEW_COLUMNS, read_counts, read_fields
    from runner.probes.phantom.report import flag_rates

    start = time.perf_counter()
    frame = {"table": lambda d: read_fields(d, VIEW_COLUMNS), "group_by": _group_by_counts,
             "counts": read_counts}[how](Path(directory))
    rates = flag_rates(frame, seed=0)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    digest = hashlib.sha256(rates.write_json().encode()).hexdigest()[:12]
    print(json.dumps({"seconds": elapsed, "peak_rss_mb": rss, "rows": frame.height,  # type: ignore[attr-defined]
                      "audits": int(rates["audits"][-1]), "digest": digest}))


def report_only(sizes: list[int]) -> None:
    print(f"load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            directory = Path(tmp) / f"audit-{n}"
            directory.mkdir()
            write_table(directory / "fields.parquet", n)
            digests = set()
            for how in _HOWS:
                res = subprocess.run([sys.executable, __file__, "--report-child", str(directory), how], check=True,
                                     capture_output=True, text=True)
                fig = json.loads(res.stdout.strip().splitlines()[-1])
                digests.add(fig["digest"])
                print(f"{n:>10} calls  report from {how:8}  {fig['rows']:>9} rows read  {fig['seconds']:6.1f} s  "
                      f"peak RSS {fig['peak_rss_mb']:6.0f} MiB  ({fig['audits']} units)  load {os.getloadavg()[0]:.1f}")
            print(f"{n:>10} calls  flag rates {'identical' if len(digests) == 1 else 'DIFFER'} from all three")


def _audit(traces: Path, out: Path, pythonpath: str | None = None) -> dict[str, float]:
    """One audit in a fresh process (``_child``), with ``pythonpath`` first on the import path when given."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    res = subprocess.run([sys.executable, __file__, "--child", str(traces), str(out)], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(res.stdout.strip().splitlines()[-1])


def before(sizes: list[int], rev: str, rounds: int) -> None:
    """Each size audited with revision ``rev``'s runner and with the working tree's, alternated ``rounds`` times."""
    repo = Path(__file__).resolve().parent.parent
    print(f"load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "runner"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        for n in sizes:
            traces = Path(tmp) / f"traces-{n}.jsonl"
            write_traces(traces, n)
            for r in range(rounds):
                figs = {}
                for side, path in (("before", str(old)), ("after", None)):
                    out = Path(tmp) / f"audit-{n}-{side}-{r}"
                    figs[side] = fig = _audit(traces, out, path)
                    print(f"{n:>9} calls  {side:6} ({rev if path else 'working tree'})  {fig['calls_per_s']:9.0f} calls/s  "
                          f"{fig['calls'] / fig['cpu_s']:7.0f} calls per CPU-s  {fig['cpu_s'] / fig['calls'] * 1e6:6.1f} µs CPU "
                          f"per call  peak RSS {fig['peak_rss_mb']:6.0f} MiB  load {os.getloadavg()[0]:.1f}")
                b, f = figs["before"], figs["after"]
                print(f"{n:>9} calls  after / before: {b['cpu_s'] / f['cpu_s']:.2f}× calls per CPU-s, "
                      f"{b['seconds'] / f['seconds']:.2f}× calls/s  (round {r + 1} of {rounds})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--report-only", action="store_true", help="time the report alone over a written table")
    ap.add_argument("--before", metavar="REV", help="also audit with git revision REV's runner, side by side")
    ap.add_argument("--rounds", type=int, default=2, help="with --before: before/after pairs per size")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--report-child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(*a.child)
        return
    if a.report_child:
        _report_child(*a.report_child)
        return
    if a.report_only:
        report_only(a.sizes)
        return
    if a.before:
        before(a.sizes, a.before, a.rounds)
        return
    print(f"load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in a.sizes:
            traces = Path(tmp) / f"traces-{n}.jsonl"
            write_traces(traces, n)
            out = Path(tmp) / f"audit-{n}"
            fig = _audit(traces, out)
            print(f"{n:>9} calls  input {traces.stat().st_size / 2**20:7.1f} MiB  {fig['calls_per_s']:9.0f} calls/s  "
                  f"{fig['seconds']:6.1f} s  {fig['calls'] / fig['cpu_s']:7.0f} calls per CPU-s  report {fig['report_s']:5.1f} s  peak RSS {fig['peak_rss_mb']:6.0f} MiB (driver before the report {fig['audit_rss_mb']:5.0f})  output "
                  f"{fig['output_bytes'] / 2**20:6.1f} MiB  ({fig['fields']} fields)  load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

"""The whole pipeline a user runs, end to end: N tool calls as OTLP JSON → ``trialgrid import traces`` → ``trialgrid audit``.

Usage:

    python benchmarks/trace_import.py --calls 100000 1000000
    python benchmarks/trace_import.py --calls 100000 --before 9ed308a --rounds 2

For each size it writes a synthetic OTLP JSON file the way a collector's file exporter does — one
``ExportTraceServiceRequest`` per line, 512 spans a line — of OTel GenAI ``chat`` spans
(``gen_ai.system_instructions``, ``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.tool.definitions``): conversations of 1–8 calls, four arguments a call (an order id and an
email from the user's turn, mostly; an amount; a note), each later call with the whole history before it
(its earlier calls and their tool results) in ``gen_ai.input.messages``, as instrumentations write it. Then it
runs the two commands exactly as a user would, each in its own process (``python -m runner``, the
``trialgrid`` entry point):

    trialgrid import traces SPANS --format otlp --out IMPORT --force
    trialgrid audit IMPORT/traces.jsonl --out AUDIT --workers 2

and prints, per stage and end to end (generation excluded): calls/s by wall clock, calls per CPU-second (the
command's process and its workers: what a loaded machine bends less), the peak RSS of the largest process,
and the bytes written, beside the load average (the 2-core machine is shared). ``--workers`` sets the audit's
processes (default 2).

``--before REV`` runs both commands with the ``runner`` package of git revision REV (``git archive``, first
on ``PYTHONPATH``) and with the working tree, alternated ``--rounds`` times over the same input, and prints
the ratio (≥ 20,000 calls/s end to end on 2 cores, peak RSS ≤ 2 GB, the same at 100k and
1M calls). The figures and their load averages are in docs/performance.md, "Trace audit".

Measured 2026-12-03, ``--calls 100000 1000000 --before 9ed308a --rounds 1``, load average 0.7-1.9
(calls/s by wall clock [per CPU-second]; peak RSS import / audit):

      100,000  before  import 17,008/s [16,790]  audit 12,550/s [ 7,039]  end to end 7,221/s [4,960]  154 / 377 MiB
      100,000  after   import 17,811/s [17,580]  audit 14,032/s [ 7,879]  end to end 7,849/s [5,441]  153 / 366 MiB
    1,000,000  before  import 16,714/s [16,844]  audit 17,419/s [ 9,023]  end to end 8,530/s [5,876]  177 / 822 MiB
    1,000,000  after   import 16,668/s [16,830]  audit 19,752/s [10,255]  end to end 9,040/s [6,372]  177 / 806 MiB

So memory is far under 2 GB (the audit's still grows with the conversations), and the speed is under half the
target: the import is one process at ~60 µs of CPU a call, the audit two at ~76 µs each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trace_audit import _TOOLS, conversations  # one generator of conversations for both trace benchmarks

ROOT = Path(__file__).resolve().parents[1]
SPANS_PER_LINE = 512
TOOLS = json.dumps([{"type": "function", "name": t, "description": f"{t.replace('_', ' ')} for a customer",
                     "parameters": {"type": "object", "properties": {
                         "order_id": {"type": "string"}, "email": {"type": "string"},
                         "amount": {"type": "number"}, "note": {"type": "string"}}}} for t in _TOOLS])


def _s(key: str, value: str) -> str:
    return json.dumps({"key": key, "value": {"stringValue": value}})


def _span(conv: int, turn: int, user: str, history: list[dict[str, object]], args: dict[str, object],
          span_no: int) -> str:
    inp: list[dict[str, object]] = [{"role": "user", "parts": [{"type": "text", "content": user}]}, *history]
    out = [{"role": "assistant", "finish_reason": "tool_call", "parts": [
        {"type": "tool_call", "id": f"call_{conv}_{turn}", "name": _TOOLS[turn % len(_TOOLS)], "arguments": args}]}]
    attrs = ",".join([_s("gen_ai.operation.name", "chat"), _s("gen_ai.provider.name", "openai"),
                      _s("gen_ai.conversation.id", f"conv-{conv}"),
                      _s("gen_ai.system_instructions", json.dumps([{"type": "text",
                                                                    "content": "You are the support assistant."}])),
                      _s("gen_ai.input.messages", json.dumps(inp)), _s("gen_ai.output.messages", json.dumps(out)),
                      _s("gen_ai.tool.definitions", TOOLS)])
    return (f'{{"traceId":"{conv:032x}","spanId":"{span_no + 1:016x}","name":"chat gpt","kind":3,'
            f'"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{attrs}]}}')


def generate(path: Path, calls: int, seed: int = 7) -> int:
    """``calls`` tool calls as OTLP JSON lines (the shape of ``benchmarks/trace_audit.py``'s traces); its bytes."""
    with path.open("w") as fh:
        spans: list[str] = []

        def flush() -> None:
            fh.write('{"resourceSpans":[{"resource":{"attributes":[' + _s("service.name", "bench")
                     + ']},"scopeSpans":[{"scope":{"name":"bench"},"spans":[' + ",".join(spans) + "]}]}]}\n")
            spans.clear()

        history: list[dict[str, object]] = []
        last = 0
        for conv, turn, i, user, tool, args in conversations(calls, seed):
            if conv != last:
                history, last = [], conv
            spans.append(_span(conv, turn, user, history, args, i))
            call_id = f"call_{conv}_{turn}"
            history += [{"role": "assistant", "parts": [{"type": "tool_call", "id": call_id,
                                                         "name": tool, "arguments": args}]},
                        {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id,
                                                    "response": {"ok": True, "total": args["amount"]}}]}]
            if len(spans) == SPANS_PER_LINE:
                flush()
        if spans:
            flush()
    return path.stat().st_size


def _run(argv: list[str], pythonpath: str | None, cwd: Path) -> dict[str, float]:
    """One command in its own process: wall seconds, CPU seconds (it and its workers), peak RSS (MiB) of the
    largest of them, from ``wait4``."""
    env = dict(os.environ)
    # ``-m`` puts the working directory first on the path: run where no ``runner`` package is, and name the one
    # to run (REV's copy, or this tree's) first on PYTHONPATH
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath or str(ROOT), env.get("PYTHONPATH")) if p)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "runner", *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024}


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.iterdir())


def pipeline(src: Path, work: Path, workers: int, pythonpath: str | None = None) -> dict[str, float]:
    """``import traces`` then ``audit`` of ``src``, into ``work`` (emptied first)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    imp, aud = work / "import", work / "audit"
    a = _run(["import", "traces", str(src), "--format", "otlp", "--out", str(imp), "--force"], pythonpath, work)
    summary = json.loads((imp / "import.json").read_text())
    b = _run(["audit", str(imp / "traces.jsonl"), "--out", str(aud), "--workers", str(workers)], pythonpath, work)
    meta = json.loads((aud / "audit.json").read_text())
    out = {"calls": summary["imported"], "audited": meta["calls"], "import_wall": a["wall"], "import_cpu": a["cpu"],
           "import_rss": a["rss"], "audit_wall": b["wall"], "audit_cpu": b["cpu"], "audit_rss": b["rss"],
           "import_bytes": _size(imp), "audit_bytes": _size(aud)}
    shutil.rmtree(work, ignore_errors=True)
    return out


def _line(n: int, label: str, r: dict[str, float]) -> str:
    wall, cpu = r["import_wall"] + r["audit_wall"], r["import_cpu"] + r["audit_cpu"]
    return (f"{n:>9,} {label:<22} import {n / r['import_wall']:>7,.0f}/s [{n / r['import_cpu']:>7,.0f}]  "
            f"audit {n / r['audit_wall']:>7,.0f}/s [{n / r['audit_cpu']:>7,.0f}]  "
            f"end to end {n / wall:>7,.0f}/s [{n / cpu:>6,.0f}; {cpu / n * 1e6:5.0f} µs CPU a call]  "
            f"peak RSS {r['import_rss']:5,.0f} / {r['audit_rss']:5,.0f} MiB  out {r['import_bytes'] / 2**20:6,.0f} + "
            f"{r['audit_bytes'] / 2**20:4,.0f} MiB  load {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--workers", type=int, default=2, help="the audit's processes (--workers)")
    ap.add_argument("--before", metavar="REV", help="also run git revision REV's runner, alternated")
    ap.add_argument("--rounds", type=int, default=2, help="with --before: before/after pairs per size")
    a = ap.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores; "
          f"audit --workers {a.workers}")
    print("calls/s by wall clock, [calls per CPU-second of the command and its workers]; peak RSS import / audit")
    with tempfile.TemporaryDirectory(prefix="trace-pipeline-") as tmp:
        old: str | None = None
        if a.before:
            old = str(Path(tmp) / "before")
            Path(old).mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.before, "runner"], check=True,
                                     capture_output=True)
            subprocess.run(["tar", "-x", "-C", old], input=archive.stdout, check=True)
        for side, path in ((("before", old), ("after", None)) if old else (("working tree", None),)):
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (path or str(ROOT), os.environ.get("PYTHONPATH"))
                                                              if p))
            where = subprocess.run([sys.executable, "-c", "import runner; print(runner.__file__)"], env=env, cwd=tmp,
                                   check=True, capture_output=True, text=True).stdout.strip()
            print(f"{side} runs {where}")
        for n in a.calls:
            src = Path(tmp) / f"spans-{n}.otlp.jsonl"
            in_bytes = generate(src, n)
            print(f"{n:>9,} calls: {in_bytes / 2**20:,.0f} MiB of OTLP JSON in")
            for r in range(a.rounds if old else 1):
                figs = {}
                for side, path in ((("before", old), ("after", None)) if old else (("working tree", None),)):
                    figs[side] = fig = pipeline(src, Path(tmp) / "work", a.workers, path)
                    assert fig["calls"] == fig["audited"] == n, fig
                    print(_line(n, f"{side} ({a.before})" if path else side, fig), flush=True)
                if old:
                    b, f = figs["before"], figs["after"]
                    cpu_b, cpu_f = b["import_cpu"] + b["audit_cpu"], f["import_cpu"] + f["audit_cpu"]
                    wall_b, wall_f = b["import_wall"] + b["audit_wall"], f["import_wall"] + f["audit_wall"]
                    print(f"{n:>9,} after / before (round {r + 1} of {a.rounds}): {cpu_b / cpu_f:.2f}× calls per "
                          f"CPU-s, {wall_b / wall_f:.2f}× calls/s (import {b['import_cpu'] / f['import_cpu']:.2f}×, "
                          f"audit {b['audit_cpu'] / f['audit_cpu']:.2f}× per CPU-s)", flush=True)
            src.unlink()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

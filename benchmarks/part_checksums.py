"""What the parts' checksums cost (``runner.output.checksums``), and bit flips at any count.

Side by side in one run, alternating so the machine's load drifts over both alike:

- **sink**: rows/s of ``TrialSink`` append..close (the sink benchmark's rows and schema) writing checksummed
  parts, against the same sink writing plain parts (the writer swapped for ``ipc.new_file``, as before);
- **read** (``--out OUT``, repeatable): ``trialgrid report OUT --json FILE -q`` in a fresh process, and
  ``Output.open(OUT)`` (manifest, footers, and the verification of every batch) in this one, in CPU seconds
  (the wall time swings with the shared cores), each with the verification on and with it switched off (``runner.output.parts.verify_part`` replaced by a no-op);
- **flips** (``--flips N`` with ``--out``): N seeded single-bit flips over a copy of the first OUT's parts, each
  read back through ``Output.open(...).scan()``: detected (one ``UserError`` line naming the part), harmless (the
  rows equal the originals), or silent / other (a changed value or another exception: both failures).

    python benchmarks/part_checksums.py [--rows 100000] [--out OUT]... [--flips 0] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sink_throughput import SCHEMA, make_rows

import runner.output.parts as parts_module
import runner.output.sink as sink_module
from runner.core.errors import UserError
from runner.output import Output
from runner.output.checksums import Verdict
from runner.output.sink import TrialSink

_OFF = """
import sys
import runner.output.parts as p
from runner.output.checksums import Verdict
p.verify_part = lambda reader: Verdict(False, None, ())
from runner.cli import main
sys.argv = ["trialgrid", *sys.argv[1:]]
main()
"""
_ON = "import sys\nfrom runner.cli import main\nsys.argv = ['trialgrid', *sys.argv[1:]]\nmain()\n"


class _PlainWriter:
    """The writer parts had before checksums."""

    def __init__(self, sink: pa.NativeFile, schema: pa.Schema) -> None:
        self._writer = ipc.new_file(sink, schema)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()


def _sink_pass(rows: list[dict[str, Any]], batch_rows: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with TrialSink(Path(tmp), SCHEMA, batch_rows=batch_rows) as sink:
            for row in rows:
                sink.append(row)
        return len(rows) / (time.perf_counter() - start)


def sink_figures(rows: list[dict[str, Any]], batch_rows: int, repeats: int) -> tuple[float, float]:
    checksummed, plain = [], []
    writer = sink_module.ChecksummedWriter
    for _ in range(repeats):
        checksummed.append(_sink_pass(rows, batch_rows))
        sink_module.ChecksummedWriter = _PlainWriter  # type: ignore[misc,assignment]
        try:
            plain.append(_sink_pass(rows, batch_rows))
        finally:
            sink_module.ChecksummedWriter = writer  # type: ignore[misc]
    return statistics.median(checksummed), statistics.median(plain)


def _report(out: Path, code: str) -> float:
    """CPU seconds (user + system) of one report in a fresh process: wall time swings with the shared cores."""
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", code, "report", str(out), "--json", str(Path(tmp) / "r.json"), "-q"],
                       check=True, stdout=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "100"})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _open(out: Path) -> float:
    start = time.process_time()
    Output.open(out)
    return time.process_time() - start


def read_figures(out: Path, repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"report on": [], "report off": [], "open on": [], "open off": []}
    verify = parts_module.verify_part
    for _ in range(repeats):
        times["report on"].append(_report(out, _ON))
        times["report off"].append(_report(out, _OFF))
        times["open on"].append(_open(out))
        parts_module.verify_part = lambda reader: Verdict(False, None, ())
        try:
            times["open off"].append(_open(out))
        finally:
            parts_module.verify_part = verify
    return {k: statistics.median(v) for k, v in times.items()}


def run_flips(out: Path, count: int, seed: int) -> dict[str, int]:
    tally = {"detected": 0, "harmless": 0, "silent": 0, "other": 0}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "out"
        shutil.copytree(out, copy)
        original = Output.open(copy).scan().collect()
        files = sorted((copy / "trials").glob("*.arrow"))
        sizes = [p.stat().st_size * 8 for p in files]
        rng = random.Random(seed)
        for _ in range(count):
            at = rng.randrange(sum(sizes))
            index = 0
            while at >= sizes[index]:
                at -= sizes[index]
                index += 1
            part = files[index]
            with open(part, "r+b") as f:
                f.seek(at // 8)
                byte = f.read(1)[0]
                f.seek(at // 8)
                f.write(bytes([byte ^ (1 << (at % 8))]))
            try:
                seen = Output.open(copy).scan().collect()
                tally["harmless" if seen.equals(original) else "silent"] += 1
            except UserError as exc:
                tally["detected" if part.name in str(exc) and "\n" not in str(exc) else "other"] += 1
            except Exception:
                tally["other"] += 1
            finally:
                with open(part, "r+b") as f:
                    f.seek(at // 8)
                    f.write(bytes([byte]))
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch-rows", type=int, default=4096)
    parser.add_argument("--out", type=Path, action="append", default=[])
    parser.add_argument("--flips", type=int, default=0)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs; median of {args.repeats}, alternating")
    if args.rows:
        on, off = sink_figures(make_rows(args.rows), args.batch_rows, args.repeats)
        print(f"sink, {args.rows:,} rows in batches of {args.batch_rows}: checksummed {on:,.0f} rows/s, "
              f"plain {off:,.0f} rows/s, ratio {on / off:.3f}")
    for out in args.out:
        size = sum(p.stat().st_size for p in (out / "trials").glob("*.arrow"))
        f = read_figures(out, args.repeats)
        print(f"{out} ({size / (1 << 20):.1f} MiB of parts):")
        print(f"  trialgrid report --json, CPU: verified {f['report on']:.2f} s, unverified {f['report off']:.2f} s, "
              f"ratio {f['report on'] / f['report off']:.3f}")
        print(f"  Output.open, CPU:             verified {f['open on']:.3f} s, unverified {f['open off']:.3f} s")
    if args.flips and args.out:
        tally = run_flips(args.out[0], args.flips, args.seed)
        print(f"{args.flips} bit flips (seed {args.seed}) in {args.out[0]}: " + ", ".join(f"{v} {k}" for k, v in tally.items()))


if __name__ == "__main__":
    main()

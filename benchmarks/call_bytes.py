"""Bytes per trial with every model call on the row (format 2) against the same trials without it (format 1).

Usage: python benchmarks/call_bytes.py [--trials 200000] [--sweeps quickstart propagation]

For each bundled sweep named (as it is), and then for the quickstart design scaled to
``--trials`` (its ``runs:`` raised; 0 skips it), a run into a temporary directory,
then the size of ``OUT/trials`` on disk (format 2), and the size of the same parts
rewritten without the ``calls`` and ``call_blobs`` columns, batch by batch — what
format 1 wrote for the same trials. Prints bytes per trial for both and their ratio
(at most 2x), and how much of the growth is the blobs (system
prompts, catalogues, params: stored once per record batch). Figures, not a test.

Measured on a shared 2-core machine: quickstart 671 → 1,060 B/trial (1.58x);
the quickstart scaled to 1,000,116 trials 667 → 1,048 B/trial (1.57x, blobs 6.4
B/trial); propagation 1,079 → 2,020 (1.87x); negatives 427 → 828 (1.94x); phantom
422 → 709 (1.68x).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
CALL_COLUMNS = ("calls", "call_blobs")


def _bytes(trials: Path) -> int:
    return sum(p.stat().st_size for p in trials.glob("*.arrow"))


def _without_calls(trials: Path, dest: Path) -> tuple[int, int, int]:
    """(bytes of the parts rewritten without the call columns, bytes of call_blobs, rows), batch by batch."""
    dest.mkdir(parents=True, exist_ok=True)
    blobs = rows = 0
    for part in sorted(trials.glob("*.arrow")):
        with pa.memory_map(str(part)) as source:
            reader = ipc.open_file(source)
            keep = [i for i, name in enumerate(reader.schema.names) if name not in CALL_COLUMNS]
            schema = pa.schema([reader.schema.field(i) for i in keep], metadata=reader.schema.metadata)
            with pa.OSFile(str(dest / part.name), "wb") as sink, ipc.new_file(sink, schema) as writer:
                for b in range(reader.num_record_batches):
                    batch = reader.get_batch(b)
                    rows += batch.num_rows
                    if "call_blobs" in batch.schema.names:
                        blobs += batch.column("call_blobs").nbytes
                    writer.write_batch(pa.RecordBatch.from_arrays([batch.column(i) for i in keep], schema=schema))
    return _bytes(dest), blobs, rows


def _scaled_quickstart(tmp: Path, trials: int) -> Path:
    sweep = yaml.safe_load((CONFIGS / "quickstart.yaml").read_text())
    cells = 3 * 13 * 3  # models × triples × conditions of the quickstart
    sweep["probes"][0]["runs"] = max(1, math.ceil(trials / cells))
    for probe in sweep["probes"]:
        for key in ("cases", "catalogue"):
            probe[key] = str(CONFIGS / probe[key])
    path = tmp / "quickstart-scaled.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


def measure(sweep: Path, tmp: Path, label: str) -> None:
    import runner
    from runner.config.sweep import load_sweep

    out = tmp / f"out-{label}"
    started = time.perf_counter()
    runner.run(load_sweep(sweep), out, quiet=True)
    elapsed = time.perf_counter() - started
    after = _bytes(out / "trials")
    before, blobs, rows = _without_calls(out / "trials", tmp / f"v1-{label}")
    print(f"  {label:<22} {rows:>10,} trials ({elapsed:,.0f} s)  format 1: {before / rows:7.0f} B/trial  "
          f"format 2: {after / rows:7.0f} B/trial  = {after / before:.2f}x  "
          f"(blobs {blobs / rows:.1f} B/trial)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200_000, help="trials of the scaled quickstart (0: skip)")
    parser.add_argument("--sweeps", nargs="*", default=["quickstart", "propagation"], help="bundled sweeps, as is")
    args = parser.parse_args()
    print("bytes per trial on disk (OUT/trials), with the recorded calls and without them")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for name in args.sweeps:
            measure(CONFIGS / f"{name}.yaml", tmp, name)
        if args.trials:
            measure(_scaled_quickstart(tmp, args.trials), tmp, "quickstart-scaled")


if __name__ == "__main__":
    main()

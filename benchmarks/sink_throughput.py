"""Rows/s of the trial sink, and of the row -> Arrow conversions it could use.

Prints, side by side in one run on the same ~25-column trial schema (with
``list<string>``, ``list<struct<id, name, arguments, parse_error>>`` and a tz-aware
timestamp column):

- ``from_pylist``: ``pa.RecordBatch.from_pylist`` per batch;
- ``per-column pa.array``: ``runner.output.sink.to_record_batch``, what the sink uses;
- ``python flat builders``: a recursive, DataType-driven builder written in Python
  (lists as flat values + int32 offsets, structs as child columns, null masks), the
  alternative the sink does not use because Arrow's C++ converter beats it;
- ``TrialSink append..close``: append every row, flush, rotate, close (finalize, with
  its re-read, re-write and fsync), in a fresh temporary directory.

    python benchmarks/sink_throughput.py [--rows 200000] [--batch-rows 4096] [--part-rows 100000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runner.output.sink import TrialSink, to_record_batch

TOOL_CALL = pa.struct(
    [("id", pa.string()), ("name", pa.string()), ("arguments", pa.string()), ("parse_error", pa.string())]
)
SCHEMA = pa.schema(
    [
        ("trial_id", pa.string()),
        ("sweep_id", pa.string()),
        ("model", pa.string()),
        ("provider", pa.string()),
        ("probe", pa.string()),
        ("case_id", pa.string()),
        ("condition", pa.string()),
        ("run", pa.int32()),
        ("seed", pa.int64()),
        ("status", pa.string()),
        ("error_kind", pa.string()),
        ("error", pa.string()),
        ("attempts", pa.int16()),
        ("latency_s", pa.float64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("response_text", pa.string()),
        ("tool_calls", pa.list_(TOOL_CALL)),
        ("tools_called", pa.list_(pa.string())),
        ("catalogue_order", pa.list_(pa.string())),
        ("decoy_called", pa.bool_()),
        ("expected_called", pa.bool_()),
        ("n_calls", pa.int8()),
        ("score", pa.float32()),
    ]
)
CONDITIONS = ("ungroundable", "groundable_known", "groundable_unknown")


def make_rows(n: int) -> list[dict[str, Any]]:
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    rows = []
    for i in range(n):
        k = i % 3
        calls = [
            {
                "id": f"call_{i}_{j}",
                "name": f"tool_{(i + j) % 10}",
                "arguments": '{"vendor": "Acme Payments", "limit": 10}',
                "parse_error": None if (i + j) % 11 else "Expecting value: line 1 column 1",
            }
            for j in range(k)
        ]
        error = i % 50 == 0
        rows.append(
            {
                "trial_id": f"{i:016x}",
                "sweep_id": "3f2a9c",
                "model": ("sim-careful", "sim-typical", "sim-reckless")[i % 3],
                "provider": "sim",
                "probe": "misselection",
                "case_id": f"triple-{i % 12:02d}",
                "condition": CONDITIONS[(i // 3) % 3],
                "run": i % 5,
                "seed": (i * 2654435761) % (1 << 63),
                "status": "error" if error else "ok",
                "error_kind": "transient" if error else None,
                "error": "connection reset" if error else None,
                "attempts": 1 + error,
                "latency_s": 0.0004 + (i % 7) * 1e-5,
                "input_tokens": 310 + i % 40,
                "output_tokens": 25 + i % 9,
                "started_at": start + dt.timedelta(microseconds=i),
                "response_text": "" if k else "Which provider do you mean?",
                "tool_calls": None if error else calls,
                "tools_called": None if error else [c["name"] for c in calls],
                "catalogue_order": [f"tool_{(i + j) % 10}" for j in range(10)],
                "decoy_called": None if error else k == 2,
                "expected_called": None if error else k == 1,
                "n_calls": k,
                "score": None if error else k / 2,
            }
        )
    return rows


Builder = Callable[[list[Any]], pa.Array]


def python_builder(type_: pa.DataType) -> Builder:
    """Per-type column builder in Python, recursive over the DataType."""
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        child = python_builder(type_.value_type)
        offset_type = pa.int64() if pa.types.is_large_list(type_) else pa.int32()
        array_cls = pa.LargeListArray if pa.types.is_large_list(type_) else pa.ListArray

        def build_list(values: list[Any]) -> pa.Array:
            offsets = [0]
            flat: list[Any] = []
            mask = []
            end = 0
            for value in values:
                if value is None:
                    mask.append(True)
                else:
                    flat.extend(value)
                    end += len(value)
                    mask.append(False)
                offsets.append(end)
            null_mask = pa.array(mask, pa.bool_()) if any(mask) else None
            return array_cls.from_arrays(pa.array(offsets, offset_type), child(flat), type=type_, mask=null_mask)

        return build_list
    if pa.types.is_struct(type_):
        fields = list(type_)
        children = [(field.name, python_builder(field.type)) for field in fields]

        def build_struct(values: list[Any]) -> pa.Array:
            mask = [value is None for value in values]
            columns = [
                build([None if value is None else value.get(name) for value in values])
                for name, build in children
            ]
            null_mask = pa.array(mask, pa.bool_()) if any(mask) else None
            return pa.StructArray.from_arrays(columns, fields=fields, mask=null_mask)

        return build_struct
    return lambda values: pa.array(values, type=type_)


def python_builders_batch(builders: Sequence[tuple[str, Builder]]) -> Callable[[Sequence[Mapping[str, Any]]], pa.RecordBatch]:
    def convert(rows: Sequence[Mapping[str, Any]]) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([build([row.get(name) for row in rows]) for name, build in builders], schema=SCHEMA)

    return convert


REPEATS = 3


def rate(convert: Callable[[Sequence[Mapping[str, Any]]], pa.RecordBatch], rows: list[dict[str, Any]], batch_rows: int) -> float:
    """Median rows/s over REPEATS passes."""
    chunks = [rows[i : i + batch_rows] for i in range(0, len(rows), batch_rows)]
    convert(chunks[0])  # warm-up
    rates = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for chunk in chunks:
            convert(chunk)
        rates.append(len(rows) / (time.perf_counter() - start))
    return statistics.median(rates)


def sink_rate(rows: list[dict[str, Any]], batch_rows: int, part_rows: int) -> tuple[float, int, float]:
    """Median rows/s of append-everything-then-close over REPEATS fresh directories."""
    rates = []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            sink = TrialSink(Path(tmp), SCHEMA, batch_rows=batch_rows, part_rows=part_rows)
            for row in rows:
                sink.append(row)
            sink.close()
            rates.append(len(rows) / (time.perf_counter() - start))
            assert sink.rows_written == len(rows)
            parts = len(sink.finalized_parts)
            size = sum(path.stat().st_size for path in sink.finalized_parts)
    return statistics.median(rates), parts, size / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-rows", type=int, default=4096)
    parser.add_argument("--part-rows", type=int, default=100_000)
    args = parser.parse_args()

    rows = make_rows(args.rows)
    builders = python_builders_batch([(field.name, python_builder(field.type)) for field in SCHEMA])
    sample = rows[: args.batch_rows]
    reference = pa.RecordBatch.from_pylist(sample, schema=SCHEMA)
    assert to_record_batch(sample, SCHEMA).equals(reference)
    assert builders(sample).equals(reference)

    print(f"{args.rows} rows, {len(SCHEMA)} columns, batches of {args.batch_rows}, pyarrow {pa.__version__}")
    results = [
        ("from_pylist (conversion only)", rate(lambda r: pa.RecordBatch.from_pylist(r, schema=SCHEMA), rows, args.batch_rows)),
        ("per-column pa.array, sink's (conversion only)", rate(lambda r: to_record_batch(r, SCHEMA), rows, args.batch_rows)),
        ("python flat builders (conversion only)", rate(builders, rows, args.batch_rows)),
    ]
    end_to_end, parts, bytes_per_row = sink_rate(rows, args.batch_rows, args.part_rows)
    results.append((f"TrialSink append..close, {parts} parts finalized", end_to_end))
    width = max(len(name) for name, _ in results)
    for name, value in results:
        print(f"  {name:<{width}}  {value:>11,.0f} rows/s")
    print(f"  (median of {REPEATS} passes each; {bytes_per_row:.0f} bytes/row on disk)")


if __name__ == "__main__":
    main()

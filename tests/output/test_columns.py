"""``runner.output.columns``: a few columns of finished parts, read a window of batches per memory map."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from runner.output import columns
from runner.output.columns import column_batches


def _part(path: Path, batches: int, rows: int, first: int = 0) -> pa.Table:
    """An Arrow file of ``batches`` batches of ``rows`` rows (and a last empty batch, as a seal leaves one)."""
    schema = pa.schema([("trial_id", pa.string()), ("model", pa.string()), ("status", pa.string()),
                        ("text", pa.string())])
    written = []
    with ipc.new_file(str(path), schema) as writer:
        for b in range(batches):
            ids = range(first + b * rows, first + (b + 1) * rows)
            batch = pa.record_batch([[f"t{i}" for i in ids], [f"m{i % 3}" for i in ids],
                                     ["ok" if i % 5 else "error" for i in ids], ["x" * (i % 50) for i in ids]],
                                    schema=schema)
            writer.write_batch(batch)
            written.append(batch)
        writer.write_batch(pa.RecordBatch.from_pylist([], schema=schema))
    return pa.Table.from_batches(written, schema=schema)


@pytest.mark.parametrize("window", [1, 2, 3, 16])
def test_every_row_once_in_order_across_map_windows_and_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              window: int) -> None:
    monkeypatch.setattr(columns, "MAP_BATCHES", window)
    a = _part(tmp_path / "a.arrow", batches=7, rows=5)
    b = _part(tmp_path / "b.arrow", batches=4, rows=3, first=1000)
    got = pa.Table.from_batches(list(column_batches([tmp_path / "a.arrow", tmp_path / "b.arrow"],
                                                    ("status", "trial_id"), rows=8)))
    want = pa.concat_tables([a, b]).select(["status", "trial_id"])
    assert got.equals(want)
    assert all(batch.num_rows for batch in column_batches([tmp_path / "a.arrow"], ("model",), rows=8))


def test_an_optional_column_a_part_lacks_reads_as_nulls_and_another_is_named(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "MAP_BATCHES", 2)
    _part(tmp_path / "a.arrow", batches=5, rows=4)
    got = pa.Table.from_batches(list(column_batches([tmp_path / "a.arrow"], ("model", "error"), optional=("error",))))
    assert got.num_rows == 20 and got.column("error").null_count == 20
    with pytest.raises(KeyError, match=r"a\.arrow has no 'error' column"):
        list(column_batches([tmp_path / "a.arrow"], ("model", "error")))

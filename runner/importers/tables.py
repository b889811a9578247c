"""Another harness's tables (CSV, Parquet) read for ``import trials`` and ``import agentprop``: bounded, once.

Both importers need a whole file in memory (the trials import checks duplicate cells
and numbers runs per cell over every row), so nothing streams and the size cap of
``runner.core.safety`` is what bounds memory: each file is read through
``read_capped`` (a regular file — never a device, FIFO or folder — and never more than
the cap plus one byte, whatever it grows to), a Parquet file's decoded size is held to
the same cap, the table is parsed from those bytes and no cell may be longer than
``MAX_CELL_BYTES`` (a whole file in one cell would be copied by every column
expression an importer runs). So the hash the manifest
records is the hash of exactly what was imported, and polars never sees the path
(it would read a ``[`` or ``*`` in it as a glob pattern).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from runner.core.errors import UserError
from runner.core.safety import (
    MAX_CELL_BYTES,
    check_cell_size,
    check_decoded_size,
    check_regular_file,
    decode_utf8,
    one_line,
    read_capped,
)

#: rows decoded at a time from a Parquet file, so its decoded size is checked before it is all in memory
_PARQUET_BATCH_ROWS = 1024
_CSV_SUFFIXES = (".csv",)
_PARQUET_SUFFIXES = (".parquet", ".pq")


@dataclass(frozen=True)
class Table:
    frame: pl.DataFrame
    sha256: str  # of the bytes the frame was parsed from


def _cannot_read(exc: BaseException, path: Path, what: str) -> UserError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return UserError(f"cannot read {what}: {one_line(first)[:200]}", file=path)


def read_table(path: Path, *, what: str) -> Table:
    """``path`` (``.csv``: every column as text; ``.parquet``) as a frame; every failure a located ``UserError``."""
    check_regular_file(path, what=what)  # a device or FIFO is named as such before its (missing) suffix is
    suffix = path.suffix.lower()
    if suffix not in _CSV_SUFFIXES + _PARQUET_SUFFIXES:
        raise UserError(f"unsupported file type {suffix!r}", file=path, hint="give a .csv or .parquet file")
    raw = read_capped(path, what=what)
    sha = hashlib.sha256(raw).hexdigest()
    try:
        if suffix in _CSV_SUFFIXES:
            decode_utf8(raw, path, what=what)  # a binary file is named as one, with the line of its first bad byte
            frame = pl.read_csv(io.BytesIO(raw), infer_schema_length=0)  # all text: each importer types its columns
        else:
            frame = _read_parquet(raw, path, what)
    except (pl.exceptions.PolarsError, pa.ArrowException, OSError) as exc:
        raise _cannot_read(exc, path, what) from None
    del raw
    _check_cells(frame, path, what)
    return Table(frame, sha)


def _read_parquet(raw: bytes, path: Path, what: str) -> pl.DataFrame:
    """Decoded a batch at a time, refused once past the cap: compression (a page of one repeated byte) and
    dictionary encoding (one long value in every row) both make a small file a large table."""
    parquet = pq.ParquetFile(pa.BufferReader(raw))
    meta = parquet.metadata
    check_decoded_size(sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)), path, what=what)
    batches, size = [], 0
    for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS):
        size += batch.nbytes
        check_decoded_size(size, path, what=what)
        batches.append(batch)
    table = pa.Table.from_batches(batches, schema=parquet.schema_arrow)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)  # a Table always converts to a frame
    return frame


def _check_cells(frame: pl.DataFrame, path: Path, what: str) -> None:
    """No text cell longer than the cap of ``runner.core.safety``: checked before any importer works on the frame."""
    text = [c for c, dtype in frame.schema.items() if dtype == pl.String]
    if not text or frame.height == 0:
        return
    longest = frame.select(pl.col(c).str.len_bytes().max() for c in text).row(0)
    for column, size in zip(text, longest, strict=True):
        if size is not None and size > MAX_CELL_BYTES:
            row = frame.select(pl.col(column).str.len_bytes().arg_max()).item()
            check_cell_size(size, path, what=what, row=row + 1, column=column)

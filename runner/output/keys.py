"""The resume set: which trials an output already holds, as sorted 64-bit keys of their ids.

A resume of a grid of ten million trials must know which are written without holding
ten million id strings (about 1 GB as a Python set). A trial id is 16 hex digits, so
its key is the 64-bit number they spell: 8 bytes a trial, read from the ``trial_id``
column alone of every finished part (``completed_trial_keys``), compared with numpy.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from runner.output.columns import column_batches
from runner.output.sink import _FILE_SUFFIX, _STREAM_SUFFIX

__all__ = ["completed_trial_keys", "trial_keys"]


def _trial_id_batches(trials_dir: Path, parts: Sequence[Path] | None = None) -> Iterator[pa.Array]:
    """The ``trial_id`` column of every finalized part (or of ``parts``), batch by batch (nothing else is read)."""
    trials_dir = Path(trials_dir)
    if not trials_dir.is_dir():
        return
    streams = sorted(p.name for p in trials_dir.glob(f"part-*{_STREAM_SUFFIX}"))
    if streams:
        raise RuntimeError(f"{trials_dir} has unrepaired stream parts {streams}; run repair_parts first")
    found = sorted(trials_dir.glob(f"part-*{_FILE_SUFFIX}")) if parts is None else parts
    for batch in column_batches(found, ["trial_id"]):
        yield batch.column(0).drop_null()


_HEX = np.full(256, 255, dtype=np.uint64)
_HEX[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint64)
_SHIFTS = np.arange(60, -1, -4, dtype=np.uint64)


def trial_keys(ids: pa.Array) -> np.ndarray:
    """Trial ids (16 lowercase hex chars) as uint64, vectorised; other shapes go through ``int``."""
    ids = ids.cast(pa.string())
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int32)[ids.offset: ids.offset + len(ids) + 1]
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[offsets[0]: offsets[-1]] if len(ids) else np.empty(0, np.uint8)
    if len(ids) and np.all(np.diff(offsets) == 16):
        nibbles = _HEX[data.reshape(-1, 16)]
        if not (nibbles == 255).any():
            return np.bitwise_or.reduce(nibbles << _SHIFTS, axis=1)
    return np.array([int(x, 16) for x in ids.to_pylist()], dtype=np.uint64)


def completed_trial_keys(trials_dir: Path, parts: Sequence[Path] | None = None) -> np.ndarray:
    """Sorted uint64 keys of every written trial id (of ``parts``, if given): 8 bytes a trial, for resuming huge
    grids. A Python set of 10 million id strings costs about 1 GB; this costs 80 MB.
    """
    columns = [trial_keys(column) for column in _trial_id_batches(trials_dir, parts)]
    keys = np.concatenate(columns) if columns else np.empty(0, dtype=np.uint64)
    keys.sort()
    return keys

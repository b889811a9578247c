"""A trial's exchange with the model, read back from an output alone: every request exactly, every response.

Why a module: the report's example trials and re-scoring both read calls from rows
(``runner.core.calls`` says how they are stored), and both need the content the
calls name by id, which sits in ``call_blobs`` once per record batch. That content is
gathered here from *every* row of the output's readable parts — also from rows a newer
row of the same trial supersedes, since a batch's first row naming a blob may be one
of those. Nothing here reads a case file: what the model was asked is what the row says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from runner.core.calls import Blobs, RecordedCall, decode_calls
from runner.output.parts import readable_parts

__all__ = ["Blobs", "RecordedCall", "exchange", "output_blobs"]


def output_blobs(out: Path, parts: Iterable[Path] | None = None) -> Blobs:
    """The stored content of every part of ``out`` (``parts``: those already found); empty for format 1."""
    blobs = Blobs()
    for part in readable_parts(out) if parts is None else parts:
        frame = pl.scan_ipc(str(part), glob=False)
        if "call_blobs" not in frame.collect_schema().names():
            continue  # written before calls were recorded
        found = (frame.select(pl.col("call_blobs").explode()).drop_nulls().unnest("call_blobs")
                 .unique("id", keep="first").collect())
        blobs.add(found.iter_rows(named=True))
    return blobs


def exchange(row: Mapping[str, Any], blobs: Blobs) -> list[RecordedCall] | None:
    """Each model call of ``row`` with its request rebuilt exactly; ``None`` when the row records no calls
    (an output of format 1)."""
    if row.get("calls") is None:
        return None
    return decode_calls(row["calls"], blobs, str(row.get("model_id") or ""), row.get("seed"))

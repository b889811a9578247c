"""Reading back what a run wrote, for the tests that must see every row, superseded ones included.

A test about *results* reads through the public reader (``runner.load(out)``), which applies the
newest-row rule of ``runner/output/parts.py``. A test about *writing* (every trial exactly once, a
resume that duplicates nothing, a retry that replaces rows) must see the rows that rule would hide:
that is ``written_rows``, every row of every finished part, in one place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from runner.output import Output


def written_rows(out: Path) -> pl.DataFrame:
    """Every row of every finished part (``OUT/trials/*.arrow``), superseded rows included."""
    return pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()


def live_copy(out: Path, tmp_path: Path, rows: int = 12) -> tuple[Path, list[dict[str, Any]], pa.Schema]:
    """An empty output marked ``running`` with ``out``'s manifest, the first ``rows`` of ``out``'s trials to write
    into it (as a live run would, through a ``TrialSink``), and the schema its parts have."""
    live = tmp_path / "live"
    live.mkdir()
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["status"] = "running"
    (live / "manifest.json").write_text(json.dumps(manifest))
    source = Output.open(out)
    return live, source.scan().head(rows).collect().to_dicts(), ipc.open_file(str(source.parts[0])).schema

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


def without_calls(out: Path, dest: Path) -> Path:
    """A copy of the output ``out`` at ``dest`` as trials imported from another harness are: no ``calls`` /
    ``call_blobs`` columns (each part rewritten with its checksums)."""
    import shutil

    from runner.core.schema import CALL_COLUMNS

    shutil.copytree(out, dest)
    for part in (dest / "trials").glob("*.arrow"):
        table = ipc.open_file(str(part)).read_all()
        write_part(part, table.drop_columns([c for c in CALL_COLUMNS if c in table.column_names]))
    return dest


def write_part(path: Path, data: pa.Table | list[pa.RecordBatch], schema: pa.Schema | None = None) -> None:
    """A finished trial part at ``path`` holding ``data`` (a table, or batches of ``schema``), with the checksums
    every part trialgrid writes carries (``runner.output.checksums``)."""
    from runner.output.checksums import ChecksummedWriter, with_scheme

    batches = data.to_batches() if isinstance(data, pa.Table) else data
    schema = data.schema if isinstance(data, pa.Table) else schema
    assert schema is not None
    tmp = path.with_name(path.name + ".tmp")
    with pa.OSFile(str(tmp), "wb") as sink:
        writer = ChecksummedWriter(sink, with_scheme(schema))
        for batch in batches:
            writer.write_batch(batch)
        writer.close()
    tmp.replace(path)

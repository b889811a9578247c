"""Reading back what a run wrote, for the tests that must see every row, superseded ones included.

A test about *results* reads through the public reader (``runner.load(out)``), which applies the
newest-row rule of ``runner/output/parts.py``. A test about *writing* (every trial exactly once, a
resume that duplicates nothing, a retry that replaces rows) must see the rows that rule would hide:
that is ``written_rows``, every row of every finished part, in one place.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl


def written_rows(out: Path) -> pl.DataFrame:
    """Every row of every finished part (``OUT/trials/*.arrow``), superseded rows included."""
    return pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()

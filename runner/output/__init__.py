"""An output directory on disk: the writer (Arrow IPC parts), which rows count, the one-writer lock, and the
manifest's start and finish records.

It sits between ``runner.config`` (a sweep) and ``runner.execution`` (running one), so the run, the readers
above it (analysis, reporting) and the importers share one definition of what an output holds. Readers open
an output once, as an ``Output`` (``runner.output.reader``), and pass the object down.

The names below load on first use: importing ``runner.output.lock`` (a light module) does not import polars.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.output.reader import Output, Spend, as_output, spent_in

__all__ = ["Output", "Spend", "as_output", "spent_in"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("runner.output.reader"), name)

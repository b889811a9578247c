"""trialgrid's single-node product: config, grid, probes, providers, engine, sink, report, CLI.

``run`` is the one entry point for running a sweep (``trialgrid run`` calls it too;
``run_sweep`` is its earlier name); every error trialgrid raises to a caller derives
from ``TrialgridError`` (the tree: ``runner.core.errors``).

The public names below are loaded on first use (PEP 562), so importing one layer
(``runner.core.manifest``, say) does not drag in every other layer through this
package's ``__init__``; layering is checked by what a module imports, not hidden here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runner.core.errors import TrialgridError, UserError
from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, TrialSpec, Usage

if TYPE_CHECKING:
    from runner.analysis.load import load, load_summary
    from runner.config.sweep import LoadedSweep, Sweep, load_sweep
    from runner.execution.grid import Grid
    from runner.execution.modes import run, run_sweep
    from runner.execution.run import RunResult
    from runner.providers.errors import ErrorKind, ProviderError

#: public name → the module that defines it
_LAZY = {
    "load": "runner.analysis.load", "load_summary": "runner.analysis.load",
    "LoadedSweep": "runner.config.sweep", "Sweep": "runner.config.sweep", "load_sweep": "runner.config.sweep",
    "Grid": "runner.execution.grid",
    "run": "runner.execution.modes", "run_sweep": "runner.execution.modes",
    "RunResult": "runner.execution.run",
    "ErrorKind": "runner.providers.errors", "ProviderError": "runner.providers.errors",
}

__all__ = ["ChatRequest", "ChatResponse", "ErrorKind", "Grid", "LoadedSweep", "Message", "ProviderError", "RunResult",
           "Sweep", "ToolCall", "ToolSpec", "TrialSpec", "TrialgridError", "Usage", "UserError", "load", "load_summary",
           "load_sweep", "run", "run_sweep"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value

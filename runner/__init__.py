"""trialgrid's single-node product: config, grid, probes, providers, engine, sink, report, CLI.

The public names below are loaded on first use (PEP 562), so importing one layer
(``runner.core.manifest``, say) does not drag in every other layer through this
package's ``__init__``; layering is checked by what a module imports, not hidden here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runner.core.errors import UserError
from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, TrialSpec, Usage

if TYPE_CHECKING:
    from runner.analysis.load import load, load_summary
    from runner.config.sweep import LoadedSweep, Sweep, load_sweep
    from runner.execution.grid import Grid
    from runner.execution.run import RunResult, run_sweep

#: public name → the module that defines it
_LAZY = {
    "load": "runner.analysis.load", "load_summary": "runner.analysis.load",
    "LoadedSweep": "runner.config.sweep", "Sweep": "runner.config.sweep", "load_sweep": "runner.config.sweep",
    "Grid": "runner.execution.grid",
    "RunResult": "runner.execution.run", "run_sweep": "runner.execution.run",
}

__all__ = ["ChatRequest", "ChatResponse", "Grid", "LoadedSweep", "Message", "RunResult", "Sweep", "ToolCall",
           "ToolSpec", "TrialSpec", "Usage", "UserError", "load", "load_summary", "load_sweep", "run_sweep"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value

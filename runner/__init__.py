"""trialgrid's single-node product: config, grid, probes, providers, engine, sink, report, CLI.

The public names below load lazily: ``import runner`` imports none of the layers (no numba, polars or pyarrow);
the first use of a name imports the module that defines it. To add or move a name, edit ``_EXPORTS``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.analysis.load import load, load_summary
    from runner.config.sweep import LoadedSweep, Sweep, load_sweep
    from runner.core.errors import UserError
    from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, TrialSpec, Usage
    from runner.execution.grid import Grid
    from runner.execution.run import RunResult, run_sweep
    from runner.execution.run import run_sweep as run
    from runner.providers.errors import ErrorKind, ProviderError

# public name -> "module:attribute"; "module:a|b" takes the first attribute the module has
# ("run" becomes runner.execution.run.run once that lands, and is run_sweep until then)
_EXPORTS: dict[str, str] = {
    "load": "runner.analysis.load:load",
    "load_summary": "runner.analysis.load:load_summary",
    "LoadedSweep": "runner.config.sweep:LoadedSweep",
    "Sweep": "runner.config.sweep:Sweep",
    "load_sweep": "runner.config.sweep:load_sweep",
    "UserError": "runner.core.errors:UserError",
    "ChatRequest": "runner.core.types:ChatRequest",
    "ChatResponse": "runner.core.types:ChatResponse",
    "Message": "runner.core.types:Message",
    "ToolCall": "runner.core.types:ToolCall",
    "ToolSpec": "runner.core.types:ToolSpec",
    "TrialSpec": "runner.core.types:TrialSpec",
    "Usage": "runner.core.types:Usage",
    "Grid": "runner.execution.grid:Grid",
    "RunResult": "runner.execution.run:RunResult",
    "run": "runner.execution.run:run|run_sweep",
    "run_sweep": "runner.execution.run:run_sweep",
    "ErrorKind": "runner.providers.errors:ErrorKind",
    "ProviderError": "runner.providers.errors:ProviderError",
}

__all__ = ["ChatRequest", "ChatResponse", "ErrorKind", "Grid", "LoadedSweep", "Message", "ProviderError", "RunResult",
           "Sweep", "ToolCall", "ToolSpec", "TrialSpec", "Usage", "UserError", "load", "load_summary", "load_sweep",
           "run", "run_sweep"]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, _, attrs = target.partition(":")
    module = importlib.import_module(module_name)
    for attr in attrs.split("|"):
        if hasattr(module, attr):
            value = getattr(module, attr)
            globals()[name] = value  # later lookups skip __getattr__
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r} ({module_name} defines none of {attrs})")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

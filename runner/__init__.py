"""trialgrid's single-node product: config, grid, probes, providers, engine, sink, report, CLI.

``run`` is the one entry point for running a sweep (``trialgrid run`` calls it too),
and ``RunOptions`` says how; every error trialgrid raises to a
caller derives from ``TrialgridError`` and every warning is a ``TrialgridWarning`` issued
through ``warnings`` (the tree: ``runner.core.errors``).

The public names below load lazily: ``import runner`` imports none of the layers (no
numba, polars or pyarrow); the first use of a name imports the module that defines it.
To add or move a name, edit ``_EXPORTS``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.analysis.load import load, load_summary
    from runner.config.sweep import LoadedSweep, Sweep, load_sweep
    from runner.core.errors import ErrorKind, ProviderError, TrialgridError, TrialgridWarning, UserError
    from runner.core.manifest import RunStatus
    from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, TrialSpec, Usage
    from runner.execution.grid import Grid
    from runner.execution.modes import run
    from runner.execution.options import RunOptions
    from runner.execution.session import RunResult

#: public name -> "module:attribute"
_EXPORTS: dict[str, str] = {
    "load": "runner.analysis.load:load",
    "load_summary": "runner.analysis.load:load_summary",
    "LoadedSweep": "runner.config.sweep:LoadedSweep",
    "Sweep": "runner.config.sweep:Sweep",
    "load_sweep": "runner.config.sweep:load_sweep",
    "TrialgridError": "runner.core.errors:TrialgridError",
    "UserError": "runner.core.errors:UserError",
    "RunStatus": "runner.core.manifest:RunStatus",
    "TrialgridWarning": "runner.core.errors:TrialgridWarning",
    "ChatRequest": "runner.core.types:ChatRequest",
    "ChatResponse": "runner.core.types:ChatResponse",
    "Message": "runner.core.types:Message",
    "ToolCall": "runner.core.types:ToolCall",
    "ToolSpec": "runner.core.types:ToolSpec",
    "TrialSpec": "runner.core.types:TrialSpec",
    "Usage": "runner.core.types:Usage",
    "Grid": "runner.execution.grid:Grid",
    "RunResult": "runner.execution.session:RunResult",
    "run": "runner.execution.modes:run",
    "RunOptions": "runner.execution.options:RunOptions",
    "ErrorKind": "runner.core.errors:ErrorKind",
    "ProviderError": "runner.core.errors:ProviderError",
}

__all__ = ["ChatRequest", "ChatResponse", "ErrorKind", "Grid", "LoadedSweep", "Message", "ProviderError", "RunOptions",
           "RunResult", "RunStatus", "Sweep", "ToolCall", "ToolSpec", "TrialSpec", "TrialgridError", "TrialgridWarning",
           "Usage", "UserError", "load", "load_summary", "load_sweep", "run"]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""trialgrid's single-node product: config, grid, probes, providers, engine, sink, report, CLI.

``run`` is the one entry point for running a sweep (the CLI's ``trialgrid run`` calls it
too); every error it raises derives from ``TrialgridError``.
"""

from runner.analysis.load import load, load_summary
from runner.config.sweep import LoadedSweep, Sweep, load_sweep
from runner.core.errors import TrialgridError, UserError
from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, TrialSpec, Usage
from runner.execution.grid import Grid
from runner.execution.modes import run, run_sweep
from runner.execution.run import RunResult
from runner.providers.errors import ErrorKind, ProviderError

__all__ = ["ChatRequest", "ChatResponse", "ErrorKind", "Grid", "LoadedSweep", "Message", "ProviderError", "RunResult",
           "Sweep", "ToolCall", "ToolSpec", "TrialSpec", "TrialgridError", "Usage", "UserError", "load", "load_summary",
           "load_sweep", "run", "run_sweep"]

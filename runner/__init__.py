"""trialgrid's single-node product: config, grid, probes, providers, engine, sink, report, CLI."""

from runner.analysis.load import load, load_summary
from runner.config.sweep import LoadedSweep, Sweep, load_sweep
from runner.core.errors import UserError
from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, TrialSpec, Usage
from runner.execution.grid import Grid
from runner.execution.run import RunResult, run_sweep

__all__ = ["ChatRequest", "ChatResponse", "Grid", "LoadedSweep", "Message", "RunResult", "Sweep", "ToolCall",
           "ToolSpec", "TrialSpec", "Usage", "UserError", "load", "load_summary", "load_sweep", "run_sweep"]

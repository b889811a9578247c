"""trialgrid's single-node product: config, grid, probes, providers, engine, sink, report, CLI."""

from runner.config import LoadedSweep, Sweep, load_sweep
from runner.errors import UserError
from runner.grid import Grid
from runner.load import load, load_summary
from runner.run import RunResult, run_sweep
from runner.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, TrialSpec, Usage

__all__ = ["ChatRequest", "ChatResponse", "Grid", "LoadedSweep", "Message", "RunResult", "Sweep", "ToolCall",
           "ToolSpec", "TrialSpec", "Usage", "UserError", "load", "load_summary", "load_sweep", "run_sweep"]

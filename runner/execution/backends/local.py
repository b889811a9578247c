"""The ``local`` backend: every pending trial in this process, through the engine, live (``run.run_local``)."""

from __future__ import annotations

from pathlib import Path

from runner.config.sweep import LoadedSweep
from runner.execution.backends.base import Plan
from runner.execution.options import RunOptions
from runner.execution.run import RunResult, run_local


class _LocalBackend:
    name = "local"

    def run(self, loaded: LoadedSweep, out: Path, options: RunOptions, plan: Plan) -> RunResult:
        return run_local(loaded, out, options)


LOCAL = _LocalBackend()

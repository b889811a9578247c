"""What a run backend is: one way of executing a sweep into an output directory.

``runner.run`` decides *which* backend runs a sweep and refuses what cannot run
(``runner.execution.modes``); a backend only executes. Every backend runs inside the
same session (``runner.execution.session.Session``: lock, manifest, resume, budget,
remedies, cache statistics, status, finish) and only turns pending specs into rows in
its sink, honouring ``should_stop``; so a run's directory, its manifest and its resume
rules do not depend on the backend that wrote it.

This module imports neither the sweep nor the run modules at load: a plug-in's entry
point names a backend object, and looking it up (on every ``trialgrid`` command) must
stay cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from runner.config.sweep import LoadedSweep
    from runner.execution.options import RunOptions
    from runner.execution.session import RunResult


@dataclass(frozen=True)
class Plan:
    """What ``runner.execution.modes.plan`` decided: the backend, and the models it sends through batch APIs."""

    backend: str
    #: batch: the models sent through their vendor's batch API (the others run live meanwhile)
    batch_models: frozenset[str] = frozenset()
    #: a note for the user about how the plan differs from what was asked (printed before the run)
    note: str | None = None


@runtime_checkable
class Backend(Protocol):
    """Runs (or resumes) a sweep into ``out``; raises ``UserError`` for a mismatched ``out``."""

    name: str

    def run(self, loaded: LoadedSweep, out: Path, options: RunOptions, plan: Plan) -> RunResult: ...

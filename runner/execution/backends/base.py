"""What a run backend is: one way of executing a sweep into an output directory.

``runner.run`` decides *which* backend runs a sweep and refuses what cannot run
(``runner.execution.modes``); a backend only executes. Every backend runs inside the
same session (``runner.execution.session.Session``: lock, manifest, resume, budget,
remedies, cache statistics, status, finish) and only turns pending specs into rows in
its sink, honouring ``should_stop``; so a run's directory, its manifest and its resume
rules do not depend on the backend that wrote it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from runner.config.sweep import LoadedSweep
from runner.execution.session import RunResult


def _silent(line: str) -> None:
    return None


@dataclass(frozen=True)
class RunOptions:
    """How to run, beside the sweep and the output: what a backend reads, each the fields it knows."""

    quiet: bool = False
    #: progress lines (resuming, repaired parts, batches submitted and collected)
    say: Callable[[str], None] = _silent
    #: the one line announcing each newly learned parameter remedy
    notify: Callable[[str], None] | None = None
    #: no remedies: a rejected parameter fails the trial
    strict_params: bool = False
    #: local: the response cache directory (else the sweep's ``cache``)
    cache_dir: Path | None = None
    #: ray: the cluster (``auto``, ``local`` or an address; default ``auto``)
    address: str | None = None
    #: ray: worker actors (default one per CPU of the cluster)
    workers: int | None = None
    #: batch: the models sent through their vendor's batch API (the others run live meanwhile)
    batch_models: frozenset[str] = frozenset()
    #: every backend: error rows of these kinds are run again (``--retry-errors``); None: errors are kept
    retry_kinds: tuple[str, ...] | None = None
    #: every backend: wait for another process writing the output instead of refusing (``--wait``)
    wait: bool = False


@runtime_checkable
class Backend(Protocol):
    """Runs (or resumes) a sweep into ``out``; raises ``UserError`` for a mismatched ``out``."""

    name: str

    def run(self, loaded: LoadedSweep, out: Path, options: RunOptions) -> RunResult: ...

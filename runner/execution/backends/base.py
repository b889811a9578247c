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

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from runner.config.sweep import LoadedSweep
    from runner.execution.session import RunResult


@dataclass(frozen=True)
class RunOptions:
    """How to run, beside the sweep and the output: what a backend reads, each the fields it knows."""

    quiet: bool = False
    #: no remedies: a rejected parameter fails the trial
    strict_params: bool = False
    #: the response cache directory (else the sweep's ``cache``)
    cache_dir: Path | None = None
    #: batch: the models sent through their vendor's batch API (the others run live meanwhile)
    batch_models: frozenset[str] = frozenset()
    #: every backend: error rows of these kinds are run again (``--retry-errors``); None: errors are kept
    retry_kinds: tuple[str, ...] | None = None
    #: every backend: wait for another process writing the output instead of refusing (``--wait``)
    wait: bool = False
    #: local: run at most this many pending trials (a try: ``--limit``); None: all
    limit: int | None = None
    #: a plug-in backend's own options, which it validates itself (ray: ``address``, ``workers``; see cluster.options)
    backend_options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@runtime_checkable
class Backend(Protocol):
    """Runs (or resumes) a sweep into ``out``; raises ``UserError`` for a mismatched ``out``."""

    name: str

    def run(self, loaded: LoadedSweep, out: Path, options: RunOptions) -> RunResult: ...

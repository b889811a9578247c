"""What every run of a sweep shares, whatever runs it: its result, its grid, its trial runner, its counts.

A run's lifecycle (lock, manifest, resume, budget, remedies, finish) is its session
(``runner.execution.session``); what turns pending specs into rows is a backend
(``runner.execution.backends``: local, batch; Ray plugs in). Both build on the pieces
here: ``RunResult`` (what a run returns), ``grid_of``, ``build_trial_runner``
(providers and the trial runner a process — or a Ray worker — executes),
``count_statuses`` and the ``--retry-errors`` defaults. ``run_sweep`` is the local
backend under its first name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.config.sweep import LoadedSweep
from runner.core.errors import UserError
from runner.core.manifest import RunStatus
from runner.execution.engine import EngineStats
from runner.execution.grid import Grid
from runner.execution.trial import ModelBinding, TrialRunner
from runner.output.parts import inspect_parts, scan_latest
from runner.output.sink import RepairNote
from runner.providers import Provider
from runner.providers.pool import ProviderPool
from runner.providers.remedies import Learned, remedy_from_json


@dataclass
class RunResult:
    """What a run returns, whichever backend ran it (``Session.result``)."""

    out: Path
    total: int
    skipped: int
    stats: EngineStats
    counts: dict[str, int]
    elapsed_s: float
    repaired: list[RepairNote] = field(default_factory=list)
    status: RunStatus = RunStatus.COMPLETE
    stopped: str | None = None  # why scheduling stopped early (a spent budget, a batch refused); rerun to continue


def grid_of(loaded: LoadedSweep) -> Grid:
    return Grid(loaded.sweep_id, loaded.sweep.seed, [m.name for m in loaded.sweep.models], loaded.probes)


#: the error kinds ``--retry-errors`` re-attempts when none are named: the ones a later attempt may pass
DEFAULT_RETRY_KINDS = ("rate_limited", "transient", "timeout")


def count_statuses(trials_dir: Path) -> dict[str, int]:
    """Rows by status, each trial once (its newest row), over the parts that count."""
    parts, _ = inspect_parts(trials_dir, None)
    if not parts:
        return {}
    frame = scan_latest(parts).group_by("status").len().collect()
    return {row["status"]: int(row["len"]) for row in frame.iter_rows(named=True)}


def build_trial_runner(loaded: LoadedSweep, *, strict_params: bool = False,
                       on_learn: Callable[[Learned], None] | None = None,
                       known_remedies: list[dict[str, Any]] | None = None,
                       **pool_options: Any) -> tuple[TrialRunner, list[Provider]]:
    """The trial runner of a sweep and the providers it owns (close them after the run).

    ``on_learn`` hears each parameter remedy the first time it is learned;
    ``known_remedies`` (the manifest's list, on resume) are applied from the start;
    ``pool_options`` go to ``ProviderPool`` (cluster mode passes a shared ``book`` and
    ``limiter_factory`` there).
    """
    sweep = loaded.sweep
    pool = ProviderPool(strict_params=strict_params, on_learn=on_learn, **pool_options)
    if not strict_params:
        for entry in known_remedies or ():
            parsed = remedy_from_json(entry)
            if parsed is not None:
                pool.book.preload(*parsed)
    bindings = {}
    for i, m in enumerate(sweep.models):
        try:
            provider = pool.provider(m.provider, m.connection, limits=m.limits, retry=m.retry,
                                     max_connections=max(m.concurrency, m.limits.max_concurrent or 0))
        except (KeyError, ValueError) as exc:  # the key's variable vanished, or the callable broke, since loading
            raise UserError(str(exc).strip("'\""), file=loaded.path, key_path=("models", i)) from None
        bindings[m.name] = ModelBinding(m.name, m.provider, provider, m.model_id, dict(m.params), m.tool_call_parser)
    return TrialRunner({p.name: p for p in loaded.probes}, bindings, sweep.engine.timeout_s), pool.all


def per_model_concurrency(loaded: LoadedSweep) -> dict[str, int]:
    return {m.name: m.concurrency for m in loaded.sweep.models}


def response_cache_dir(loaded: LoadedSweep, given: Path | None) -> Path | None:
    """The response cache a run uses: the one given (``--cache``), else the sweep's ``cache``, else none."""
    if given is None and loaded.sweep.cache is not None:
        return Path(loaded.sweep.cache)
    return given


def run_sweep(loaded: LoadedSweep, out: Path, *, quiet: bool = False,
              say: Callable[[str], None] = lambda s: None, worker: str = "local",
              strict_params: bool = False, notify: Callable[[str], None] | None = None,
              cache_dir: Path | None = None, retry_kinds: Sequence[str] | None = None,
              wait: bool = False) -> RunResult:
    """Run (or resume) ``loaded`` into ``out`` in this process, live: the ``local`` backend under its first name.

    ``notify`` prints the one line announcing each newly learned parameter remedy
    (it is also written into the manifest at once, so a crash keeps it);
    ``strict_params`` turns remedies off: a rejected parameter fails the trial;
    ``cache_dir`` (else the sweep's ``cache``) answers repeated requests from disk;
    ``retry_kinds`` re-attempts error rows of those kinds; ``wait`` waits for another
    process writing ``out`` instead of refusing. Raises ``UserError`` for a mismatched ``out``.
    """
    from runner.execution.backends.local import run_local  # the backend runs in a session, which builds on this module

    return run_local(loaded, out, quiet=quiet, say=say, worker=worker, strict_params=strict_params, notify=notify,
                     cache_dir=cache_dir, retry_kinds=retry_kinds, wait=wait)

"""``RunOptions``: everything a run is asked to do beside its sweep and output, in one object.

``runner.run`` takes one (or its fields as keywords), checks it once, here, and hands the
same object to the backend that runs the sweep and to the session every backend runs in;
``trialgrid run``'s flags and a Ray job's arguments build the same object. So an option
is spelled, checked and documented in one place, whichever way a run is started.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from runner.config.sweep import Narrowing
from runner.core.errors import ErrorKind, UserError
from runner.core.exits import DEFAULT_RETRY_KINDS
from runner.core.gates import Gate, parse_gate

__all__ = ["RunOptions"]


@dataclass(frozen=True)
class RunOptions:
    """How to run a sweep. Every field has the default ``trialgrid run`` has without the flag.

    Checked as it is made: a bad value is a ``UserError`` naming the flag, before the sweep
    loads and anything is sent. After checking, ``cache`` is a ``Path``, ``retry_errors``
    the tuple of error kinds to run again, ``gates`` parsed ``Gate``s, and every sequence a tuple.
    """

    #: the backend: ``local``, ``batch`` (every model through its batch API), ``ray`` or a plug-in's;
    #: None picks from the sweep (``runner.execution.modes.plan``)
    mode: str | None = None
    #: the Ray cluster (an address alone means ``mode="ray"``) and its worker actors
    address: str | None = None
    workers: int | None = None
    #: the response cache directory (else the sweep's ``cache``)
    cache: str | os.PathLike[str] | None = None
    #: no remedies: a rejected parameter fails the trial
    strict_params: bool = False
    #: no progress bar
    quiet: bool = False
    #: error kinds whose rows run again (``--retry-errors``; empty: ``DEFAULT_RETRY_KINDS``, ``all``: every kind);
    #: None: error rows are kept as they are
    retry_errors: Sequence[str] | None = None
    #: wait for another process writing the output instead of refusing
    wait: bool = False
    #: error rows beyond this share of trials make the run fail (exit 1)
    max_error_rate: float = 0.0
    #: pass/fail probes (names or kinds) whose failing case makes the run fail (exit 1)
    fail_on: Sequence[str] = ()
    #: interval gates (``"upper(decoy_called | ungroundable) <= 0.2"`` or parsed ``Gate``s), beside the sweep's own
    gates: Sequence[str | Gate] = ()
    #: one request per model endpoint before the grid (``runner.providers.preflight``)
    preflight: bool = True
    #: a try: only these models (names), ``runs`` per cell, only these cases (ids), at most ``limit`` trials
    models: Sequence[str] = ()
    runs: int | None = None
    cases: Sequence[str] = ()
    limit: int | None = None
    #: a plug-in backend's own options, which it checks itself (ray: see ``cluster.options``)
    backend_options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not 0 <= self.max_error_rate <= 1:  # NaN fails this too
            raise UserError(f"--max-error-rate {self.max_error_rate:g}: a share of trials, between 0 and 1")
        if self.limit is not None and self.limit < 1:
            raise UserError(f"--limit {self.limit}: at least 1 trial")
        Narrowing(tuple(self.models), self.runs)  # made to check it: a --runs of 0 is refused before the sweep loads
        if self.workers is not None and self.workers < 1:
            raise UserError(f"--workers {self.workers}: at least 1 worker", hint="omit it for one per CPU of the cluster")
        checked = {
            "cache": Path(self.cache) if self.cache is not None else None,
            "retry_errors": _retry_kinds(self.retry_errors),
            # a malformed gate is bad input, found before the sweep loads and anything is sent
            "gates": tuple(g if isinstance(g, Gate) else parse_gate(g, "--gate") for g in self.gates),
            "fail_on": tuple(self.fail_on),
            "models": tuple(self.models),
            "backend_options": MappingProxyType(dict(self.backend_options)),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: the checked form replaces the given one once

    @property
    def picks(self) -> bool:
        """Whether the run takes only some trials of its grid (``cases``, ``limit``): a try, never the sweep's output."""
        return self.limit is not None or bool(self.cases)

    @property
    def pick_flags(self) -> list[str]:
        """What a try picks, as the flags say it (``--case invoices``, ``--limit 5``); empty: the whole grid."""
        return [*(f"--case {c}" for c in self.cases), *([f"--limit {self.limit}"] if self.limit is not None else [])]

    @property
    def narrowing(self) -> Narrowing:
        """``models`` and ``runs`` as the try they make of the sweep (empty: the whole sweep)."""
        return Narrowing(tuple(self.models), self.runs)

    @property
    def cache_dir(self) -> Path | None:
        """``cache`` as checked (a ``Path``)."""
        return self.cache if self.cache is None or isinstance(self.cache, Path) else Path(self.cache)

    @property
    def parsed_gates(self) -> tuple[Gate, ...]:
        """``gates`` as checked: parsed."""
        return tuple(g for g in self.gates if isinstance(g, Gate))

    @property
    def retry_kinds(self) -> tuple[str, ...] | None:
        """``retry_errors`` as checked: the error kinds whose rows run again, or None."""
        return None if self.retry_errors is None else tuple(self.retry_errors)


def _retry_kinds(kinds: Sequence[str] | None) -> tuple[str, ...] | None:
    """``--retry-errors`` kinds, checked against the error kinds rows carry; ``UserError`` for an unknown one."""
    if kinds is None:
        return None
    if isinstance(kinds, str):
        kinds = kinds.split(",")
    known = [k.value for k in ErrorKind]
    chosen = tuple(dict.fromkeys(k.strip() for k in kinds if k.strip())) or DEFAULT_RETRY_KINDS
    if "all" in chosen:
        return tuple(known)
    for kind in chosen:
        if kind not in known:
            raise UserError(f"--retry-errors: {kind!r} is not an error kind",
                            hint=f"error kinds: {', '.join(known)} (or all); default: {','.join(DEFAULT_RETRY_KINDS)}")
    return chosen

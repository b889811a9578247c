"""Lazy, deterministic expansion of a sweep into trial specs.

The grid is probe × case × condition × run × model, with the model innermost so
every model progresses together (and several providers share the wall-clock time
of an overnight sweep). It is never materialised: ``len`` is arithmetic and
iteration is a generator, so a 10-million-trial grid costs no memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np

from runner.core.seeding import stable_hash, stable_int
from runner.core.types import TrialSpec
from runner.probes import Probe


def trial_id(sweep_id: str, model: str, probe: str, case_id: str, condition: str, run: int) -> str:
    """Stable 64-bit id (16 hex chars) of one trial within one sweep."""
    return stable_hash(sweep_id, model, probe, case_id, condition, run, person=b"trial").hex()


def trial_seed(sweep_seed: int, model: str, probe: str, case_id: str, condition: str, run: int) -> int:
    """The trial's seed: from the sweep seed and the cell, not the sweep's provider settings."""
    return stable_int(sweep_seed, model, probe, case_id, condition, run, person=b"seed")


def unit_seed(sweep_seed: int, model: str, probe: str, case_id: str, run: int) -> int:
    """The seed every condition of one (model, case, run) shares, for paired arms."""
    return stable_int(sweep_seed, model, probe, case_id, run, person=b"unit")


@dataclass(frozen=True)
class Grid:
    sweep_id: str
    seed: int
    models: Sequence[str]
    probes: Sequence[Probe]

    def __len__(self) -> int:
        return len(self.models) * sum(p.n_cells * p.runs for p in self.probes)

    def __iter__(self) -> Iterator[TrialSpec]:
        sweep_id, seed, models = self.sweep_id, self.seed, tuple(self.models)
        for probe in self.probes:
            name = probe.name
            units: dict[tuple[int, str], int] = {}  # unit seeds of the current case
            current_case = None
            for case_id, condition in probe.cells():
                if case_id != current_case:
                    units.clear()
                    current_case = case_id
                for run in range(probe.runs):
                    for model in models:
                        unit = units.get((run, model))
                        if unit is None:
                            unit = units[(run, model)] = unit_seed(seed, model, name, case_id, run)
                        yield TrialSpec(
                            sweep_id, trial_id(sweep_id, model, name, case_id, condition, run),
                            model, name, case_id, condition, run,
                            trial_seed(seed, model, name, case_id, condition, run), unit,
                        )


def skip_done(specs: Iterable[TrialSpec], done: np.ndarray, chunk: int = 4096) -> Iterator[TrialSpec]:
    """``specs`` minus those whose id is in ``done`` (sorted uint64 keys), checked a chunk at a time.

    Vectorised so that resuming a 10-million-trial grid costs a binary search per
    chunk, not a Python set of ten million strings.
    """
    if len(done) == 0:
        yield from specs
        return
    iterator = iter(specs)
    while batch := list(islice(iterator, chunk)):
        keys = np.fromiter((int(s.trial_id, 16) for s in batch), dtype=np.uint64, count=len(batch))
        pos = np.minimum(np.searchsorted(done, keys), len(done) - 1)
        seen = done[pos] == keys
        yield from (s for s, skip in zip(batch, seen, strict=True) if not skip)

"""Lazy, deterministic expansion of a sweep into trial specs.

The grid is probe × case × condition × run × model, with the model innermost so
every model progresses together (and several providers share the wall-clock time
of an overnight sweep). It is never materialised: ``len`` is arithmetic and
iteration is a generator, so a 10-million-trial grid costs no memory.

A resume skips what is done without rebuilding it: every trial has an index in grid
order (``Grid.spec_at`` builds the spec at an index in O(1)), the written rows' cells
(probe, case, condition, run, model) map to their indexes through small per-probe
tables, each distinct cell looked up once per batch (``Grid.indexes``), and ``Grid.pending`` builds only
the specs of the indexes left. Rebuilding and hashing every spec already done cost
10 CPU s per million done trials, with nothing left to run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import islice
from typing import TYPE_CHECKING, Any

from runner.core.seeding import SEP, stable_hash, stable_int
from runner.core.types import TrialSpec
from runner.probes import Probe

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from runner.config.sweep import LoadedSweep


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

    @cached_property
    def _layout(self) -> list[tuple[Probe, list[tuple[str, str]], int]]:
        """Per probe: its cells in order and the index of its first trial."""
        layout, offset = [], 0
        for probe in self.probes:
            cells = list(probe.cells())
            layout.append((probe, cells, offset))
            offset += len(cells) * probe.runs * len(self.models)
        return layout

    def indexes_of(self, cases: Collection[str]) -> list[int]:
        """The grid indexes of the trials of ``cases``, in grid order: a ``--case`` try builds only its specs
        (``spec_at``), never the whole grid's."""
        n_models = len(self.models)
        return [offset + (cell * probe.runs + run) * n_models + m
                for probe, cells, offset in self._layout
                for cell, (case, _) in enumerate(cells) if case in cases
                for run in range(probe.runs) for m in range(n_models)]

    def size_of(self, cases: Collection[str]) -> int:
        """The trials of the grid whose case is one of ``cases`` (a ``--case`` try's whole grid)."""
        return len(self.indexes_of(cases))

    def case_ids(self) -> set[str]:
        """Every case id of the grid's probes."""
        return {case for _, cells, _ in self._layout for case, _ in cells}

    @property
    def indexable(self) -> bool:
        """Whether a trial's cell names one index (probe names, models and each probe's cells unique)."""
        names = [p.name for p in self.probes]
        return (len(set(names)) == len(names) and len(set(self.models)) == len(self.models)
                and all(len(set(cells)) == len(cells) for _, cells, _ in self._layout))

    def spec_at(self, index: int) -> TrialSpec:
        """The spec at ``index`` in grid order (``list(grid)[index]``), built on its own."""
        n_models = len(self.models)
        at = next((entry for entry in reversed(self._layout) if index >= entry[2]), None)
        if at is None:
            raise IndexError(index)
        probe, cells, offset = at
        local = index - offset
        cell, rest = divmod(local, probe.runs * n_models)
        run, m = divmod(rest, n_models)
        if cell >= len(cells):
            raise IndexError(index)
        case_id, condition = cells[cell]
        model, name, seed = self.models[m], probe.name, self.seed
        return TrialSpec(self.sweep_id, trial_id(self.sweep_id, model, name, case_id, condition, run),
                         model, name, case_id, condition, run,
                         trial_seed(seed, model, name, case_id, condition, run),
                         unit_seed(seed, model, name, case_id, run))

    def indexes(self, cells: Iterable[pa.RecordBatch]) -> np.ndarray:
        """Sorted distinct grid indexes of the rows of ``cells`` (record batches with the columns probe, case_id,
        condition, run, model); rows naming no cell of this grid are left out. Per batch, each distinct cell and
        model is looked up once in tables the size of the probes' cells; the rows map to indexes in numpy."""
        # only a resume reads cells: validate and a first run pay for neither Arrow nor numpy
        import numpy as np
        import pyarrow as pa

        from runner.output.columns import dictionary_codes

        n_models = len(self.models)
        # (probe, case, condition) -> (the index of its run 0 with model 0, its runs)
        where = {(probe.name, case, condition): (offset + cell * probe.runs * n_models, probe.runs)
                 for probe, cs, offset in self._layout for cell, (case, condition) in enumerate(cs)}
        model_at = {model: m for m, model in enumerate(self.models)}
        found = []
        for batch in cells:
            codes, values = zip(*(dictionary_codes(batch.column(name))
                                   for name in ("probe", "case_id", "condition", "model")), strict=True)
            sizes = [len(v) for v in values[:3]]
            combos, inverse = np.unique((codes[0] * sizes[1] + codes[1]) * sizes[2] + codes[2], return_inverse=True)
            base, runs = np.full(len(combos), -1, np.int64), np.zeros(len(combos), np.int64)
            for i, code in enumerate(combos.tolist()):
                rest, k = divmod(code, sizes[2])
                p, c = divmod(rest, sizes[1])
                base[i], runs[i] = where.get((values[0][p], values[1][c], values[2][k]), (-1, 0))
            models = np.array([model_at.get(v, -1) for v in values[3]], dtype=np.int64)[codes[3]]
            run = batch.column("run").cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)
            inverse = inverse.reshape(-1)
            base, runs = base[inverse], runs[inverse]
            known = (base >= 0) & (models >= 0) & (run >= 0) & (run < runs)
            found.append((base + run * n_models + models)[known])
        index = np.sort(np.concatenate(found)) if found else np.empty(0, np.int64)
        if len(index) > 1:
            index = index[np.concatenate(([True], index[1:] != index[:-1]))]
        return index

    def pending(self, done: np.ndarray, chunk: int = 65_536) -> Iterator[TrialSpec]:
        """The specs whose index is not in ``done`` (sorted grid indexes), in grid order: work in proportion to
        what is left (plus one pass of numpy over a bit mask of the grid)."""
        if len(done) == 0:
            yield from self
            return
        import numpy as np

        total = len(self)
        for start in range(0, total, chunk):
            stop = min(start + chunk, total)
            mask = np.ones(stop - start, dtype=bool)
            lo, hi = np.searchsorted(done, [start, stop])
            mask[done[lo:hi] - start] = False
            for i in np.flatnonzero(mask):
                yield self.spec_at(start + int(i))

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
                # ``trial_id`` and ``trial_seed`` hash the cell's parts then the run: the cell's part is hashed
                # once per model here, and each trial only copies that state and adds its run (same digests)
                cell = [(model, *_prefix_hashers(sweep_id, seed, model, name, case_id, condition)) for model in models]
                for run in range(probe.runs):
                    tail = str(run).encode()
                    for model, id_state, seed_state in cell:
                        unit = units.get((run, model))
                        if unit is None:
                            unit = units[(run, model)] = unit_seed(seed, model, name, case_id, run)
                        h = id_state.copy()
                        h.update(tail)
                        s = seed_state.copy()
                        s.update(tail)
                        yield TrialSpec(
                            sweep_id, h.hexdigest(), model, name, case_id, condition, run,
                            int.from_bytes(s.digest(), "little") >> 1, unit,
                        )


def _prefix_hashers(sweep_id: str, sweep_seed: int, model: str, probe: str, case_id: str,
                    condition: str) -> tuple[Any, Any]:
    """``trial_id``'s and ``trial_seed``'s hash states after every part but the run (``stable_hash``'s layout)."""
    cell = SEP.join((model, probe, case_id, condition)) + SEP
    return (hashlib.blake2b(f"{sweep_id}{SEP}{cell}".encode(), digest_size=8, person=b"trial"),
            hashlib.blake2b(f"{sweep_seed}{SEP}{cell}".encode(), digest_size=8, person=b"seed"))


def skip_done(specs: Iterable[TrialSpec], done: np.ndarray, chunk: int = 4096) -> Iterator[TrialSpec]:
    """``specs`` minus those whose id is in ``done`` (sorted uint64 keys), checked a chunk at a time.

    Vectorised so that resuming a 10-million-trial grid costs a binary search per
    chunk, not a Python set of ten million strings.
    """
    if len(done) == 0:
        yield from specs
        return
    import numpy as np

    iterator = iter(specs)
    while batch := list(islice(iterator, chunk)):
        keys = np.fromiter((int(s.trial_id, 16) for s in batch), dtype=np.uint64, count=len(batch))
        pos = np.minimum(np.searchsorted(done, keys), len(done) - 1)
        seen = done[pos] == keys
        yield from (s for s, skip in zip(batch, seen, strict=True) if not skip)


def grid_of(loaded: LoadedSweep) -> Grid:
    """The grid of a loaded sweep: its models × every probe's cells × runs, in grid order."""
    return Grid(loaded.sweep_id, loaded.sweep.seed, [m.name for m in loaded.sweep.models], loaded.probes)

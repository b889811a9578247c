"""The sweep that proves a case file passable: the same probes, answered once by the oracle persona.

``trialgrid validate SWEEP --oracle`` runs it (``runner/cli/validate.py``): every case of every probe the oracle knows is
asked once of ``provider: sim, model: oracle``, which answers as the case's key says, so a case that fails
there is a case no agent can pass (``runner.analysis.proof`` says why). Only what is measured is kept; the
models, prices, budget and cache of the user's sweep are not this sweep's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from runner.config.sweep import LoadedSweep, ModelConfig, _sweep_identity
from runner.sim.oracle import KINDS

#: the label of the oracle's rows
ORACLE_MODEL = "oracle"


@dataclass(frozen=True)
class Proof:
    loaded: LoadedSweep
    #: probe names the oracle cannot answer (the judge probe), so they are not checked
    skipped: tuple[str, ...]


def oracle_sweep(loaded: LoadedSweep) -> Proof:
    """``loaded`` with one model, the oracle, and one run per cell (the oracle is deterministic)."""
    kept = [p for p in loaded.probes if p.kind in KINDS]
    skipped = tuple(p.name for p in loaded.probes if p.kind not in KINDS)
    probes = []
    for probe in kept:
        one = copy.copy(probe)  # the loaded cases and catalogue, asked once per cell
        one.config = probe.config.model_copy(update={"runs": 1})
        probes.append(one)
    entries = [p.config for p in probes]
    sweep = loaded.sweep.model_copy(update={
        "models": [ModelConfig(name=ORACLE_MODEL, provider="sim", model="oracle")], "probes": entries,
        "prices": {}, "budget": None, "cache": None})
    proof = LoadedSweep(sweep, loaded.path, probes, _sweep_identity(sweep, probes, {}), loaded.sweep_sha256)
    return Proof(proof, skipped)

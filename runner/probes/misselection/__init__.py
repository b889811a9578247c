"""The ``misselection`` probe: does the agent reach for a decoy when it cannot ground an entity?

``probe.py`` holds the probe: its matched triples, the conditions, the scoring of each reply.
"""

from runner.probes.misselection.probe import (
    DEFAULT_DECOY,
    DEFAULT_SYSTEM,
    MisselectionConfig,
    MisselectionProbe,
    Triple,
    load_triples,
)

__all__ = ["DEFAULT_DECOY", "DEFAULT_SYSTEM", "MisselectionConfig", "MisselectionProbe", "Triple", "load_triples"]

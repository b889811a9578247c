"""Experiment kinds. Each probe module registers its class here, by ``kind``."""

from runner.probes.base import Contrast, Probe, ProbeConfig
from runner.probes.misselection import MisselectionConfig, MisselectionProbe
from runner.probes.negative import NegativeConfig, NegativeProbe
from runner.probes.phantom import PhantomConfig, PhantomProbe

PROBES: dict[str, type[Probe]] = {p.kind: p for p in (MisselectionProbe, NegativeProbe, PhantomProbe)}

__all__ = ["PROBES", "Contrast", "MisselectionConfig", "MisselectionProbe", "NegativeConfig", "NegativeProbe",
           "PhantomConfig", "PhantomProbe", "Probe", "ProbeConfig"]

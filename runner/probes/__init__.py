"""Experiment kinds. Each probe module registers its class here, by ``kind``."""

from runner.probes.base import Contrast, Probe, ProbeConfig
from runner.probes.misselection import MisselectionConfig, MisselectionProbe

PROBES: dict[str, type[Probe]] = {p.kind: p for p in (MisselectionProbe,)}

__all__ = ["PROBES", "Contrast", "MisselectionConfig", "MisselectionProbe", "Probe", "ProbeConfig"]

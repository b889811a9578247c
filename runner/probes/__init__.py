"""Experiment kinds. Each probe module registers its class here, by ``kind``."""

from runner.probes.base import Contrast, Probe, ProbeConfig
from runner.probes.grounding import GROUNDING_FIELDS, GroundingContext, check_call, check_calls
from runner.probes.judge import JudgeConfig, JudgeProbe
from runner.probes.misselection import MisselectionConfig, MisselectionProbe
from runner.probes.negative import NegativeConfig, NegativeProbe
from runner.probes.phantom import PhantomConfig, PhantomProbe
from runner.probes.propagation import PropagationConfig, PropagationProbe

PROBES: dict[str, type[Probe]] = {p.kind: p for p in (MisselectionProbe, NegativeProbe, PhantomProbe, PropagationProbe,
                                                 JudgeProbe)}

__all__ = ["GROUNDING_FIELDS", "PROBES", "Contrast", "GroundingContext", "JudgeConfig", "JudgeProbe", "MisselectionConfig",
           "MisselectionProbe", "NegativeConfig", "NegativeProbe", "PhantomConfig", "PhantomProbe", "Probe", "ProbeConfig",
           "PropagationConfig", "PropagationProbe", "check_call", "check_calls"]

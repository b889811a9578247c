"""The built-in simulated agent (provider ``sim``): deterministic, persona-driven, offline."""

from runner.providers.sim.agent import SimProvider
from runner.providers.sim.personas import PERSONAS, Persona, persona_for_model

__all__ = ["PERSONAS", "Persona", "SimProvider", "persona_for_model"]

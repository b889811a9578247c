"""The built-in simulated agent (provider ``sim``): deterministic, persona-driven, offline.

It models the experiments (it reads each probe's request shape to answer it the way a
persona would), so it sits above ``runner.probes`` and beside ``runner.providers``;
importing it registers the ``sim`` provider with ``runner.providers``.
"""

from runner.providers import register_provider
from runner.sim.agent import SimProvider
from runner.sim.oracle import is_oracle
from runner.sim.personas import PERSONAS, Persona, persona_for_model


def _check_sim(model: str) -> None:
    if not is_oracle(model):
        persona_for_model(model)


register_provider("sim", SimProvider, _check_sim)

__all__ = ["PERSONAS", "Persona", "SimProvider", "persona_for_model"]

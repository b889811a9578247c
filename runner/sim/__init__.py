"""The built-in simulated agent (provider ``sim``): deterministic, persona-driven, offline.

It models the experiments (it reads each probe's request shape to answer it the way a
persona would), so it sits above ``runner.probes`` and beside ``runner.providers``;
importing it registers the ``sim`` provider with ``runner.providers``. The agent itself
loads when a sweep first builds one: loading a sweep (``validate``) checks its model ids
against the personas only.
"""

from typing import Any

from runner.providers import Provider, register_provider
from runner.sim.personas import PERSONAS, Persona, persona_for_model


def _sim(*args: Any, **kwargs: Any) -> Provider:
    from runner.sim.agent import SimProvider

    return SimProvider(*args, **kwargs)


def _check_sim(model: str) -> None:
    from runner.sim.oracle import is_oracle

    if not is_oracle(model):
        persona_for_model(model)


register_provider("sim", _sim, _check_sim)


def __getattr__(name: str) -> Any:
    if name == "SimProvider":
        from runner.sim.agent import SimProvider

        return SimProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PERSONAS", "Persona", "SimProvider", "persona_for_model"]

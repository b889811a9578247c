"""Providers: the one place that knows how to reach a model.

``make_provider`` builds one provider instance per distinct provider configuration;
``check_model`` validates a model entry at config time so a typo fails before any
trial runs. Probes never import anything from here but ``Agent`` and the neutral
types.
"""

from __future__ import annotations

from typing import Callable

from runner.providers.base import Agent, Provider
from runner.providers.errors import ErrorKind, ProviderError, Remedy
from runner.providers.sim import PERSONAS, SimProvider, persona_for_model


def _check_sim(model: str) -> None:
    persona_for_model(model)


#: provider name → (factory, model check). Later providers register here.
PROVIDERS: dict[str, tuple[Callable[[], Provider], Callable[[str], None]]] = {
    "sim": (SimProvider, _check_sim),
}


def check_model(provider: str, model: str) -> None:
    """Raise ``ValueError`` with a readable message if ``model`` is not valid for ``provider``."""
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}: expected one of {', '.join(sorted(PROVIDERS))}")
    PROVIDERS[provider][1](model)


def make_provider(provider: str) -> Provider:
    return PROVIDERS[provider][0]()


__all__ = ["Agent", "ErrorKind", "PERSONAS", "PROVIDERS", "Provider", "ProviderError", "Remedy",
           "check_model", "make_provider"]

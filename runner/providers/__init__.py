"""Providers: the one place that knows how to reach a model.

``make_provider`` builds one provider instance per distinct provider configuration;
``check_model`` validates a model entry at config time so a typo fails before any
trial runs. Probes never import anything from here but ``Agent`` and the neutral
types.

In-process providers (``sim``, and any registered with a no-argument factory) are
used bare. The simulated agent lives above the probes (``runner.sim``), so it is not
imported here: ``runner.sim`` registers itself with ``register_provider`` when it is
imported, and the sweep loader imports it. The ``CONFIGURED`` ones (``openai``, ``anthropic``, ``openai-responses``, ``callable``) are built
from a ``settings.Connection`` and run behind ``managed.ManagedProvider`` (limits,
remedies, retries); ``pool.ProviderPool`` assembles them for a run.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from runner.providers.base import Agent, Provider
from runner.providers.errors import ErrorKind, ProviderError, Remedy
from runner.providers.settings import Connection


def _check_any(model: str) -> None:
    if not model.strip():
        raise ValueError("model id must not be empty")


def _openai(connection: Connection, **kw: Any) -> Provider:
    from runner.providers.openai_wire import OpenAIProvider

    return OpenAIProvider(connection, **kw)


def _anthropic(connection: Connection, **kw: Any) -> Provider:
    from runner.providers.anthropic_wire import AnthropicProvider

    return AnthropicProvider(connection, **kw)


def _openai_responses(connection: Connection, **kw: Any) -> Provider:
    from runner.providers.openai_responses_wire import OpenAIResponsesProvider

    return OpenAIResponsesProvider(connection, **kw)


def _callable(connection: Connection, **kw: Any) -> Provider:
    from runner.providers.callable_provider import CallableProvider

    return CallableProvider(connection)


#: provider name → (factory, model check). Later providers register here.
PROVIDERS: dict[str, tuple[Callable[..., Provider], Callable[[str], None]]] = {
    "openai": (_openai, _check_any),
    "anthropic": (_anthropic, _check_any),
    "openai-responses": (_openai_responses, _check_any),
    "callable": (_callable, _check_any),
}
#: providers whose factory takes a ``Connection`` (and that run behind ``ManagedProvider``)
CONFIGURED: frozenset[str] = frozenset({"openai", "anthropic", "openai-responses", "callable"})


def register_provider(name: str, factory: Callable[..., Provider], check: Callable[[str], None]) -> None:
    """Make ``provider: NAME`` usable in sweeps: ``factory()`` builds one, ``check(model)`` validates a model id."""
    PROVIDERS[name] = (factory, check)


def check_model(provider: str, model: str) -> None:
    """Raise ``ValueError`` with a readable message if ``model`` is not valid for ``provider``."""
    if provider not in PROVIDERS:
        near = difflib.get_close_matches(provider.lower(), PROVIDERS, n=1)
        raise ValueError(f"unknown provider {provider!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                         + f": expected one of {', '.join(sorted(PROVIDERS))}")
    PROVIDERS[provider][1](model)


def make_provider(provider: str, connection: Connection | None = None, **kw: Any) -> Provider:
    """One provider instance; configured providers need their ``Connection``."""
    factory = PROVIDERS[provider][0]
    if provider in CONFIGURED:
        return factory(connection or Connection(provider), **kw)
    return factory()


__all__ = [
    "CONFIGURED",
    "PROVIDERS",
    "Agent",
    "Connection",
    "ErrorKind",
    "Provider",
    "ProviderError",
    "Remedy",
    "check_model",
    "make_provider",
    "register_provider",
]

"""Providers: the one place that knows how to reach a model.

``make_provider`` builds one provider instance per distinct provider configuration;
``check_model`` validates a model entry at config time so a typo fails before any
trial runs. Probes never import anything from here but ``Agent`` and the neutral
types.

In-process providers (``sim``, and any registered with a no-argument factory) are
used bare. The simulated agent lives above the probes (``runner.sim``), so it is not
imported here: ``runner.sim`` registers itself with ``register_provider`` when it is
imported, and the sweep loader imports it. The ``CONFIGURED`` ones (registered with
``configured=True``: the wire formats and ``callable``) are
built from a ``settings.Connection`` and run behind ``managed.ManagedProvider`` (limits,
remedies, retries); ``pool.ProviderPool`` assembles them for a run.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from runner.providers.base import Agent, Provider
from runner.providers.errors import ErrorKind, ProviderError, Remedy
from runner.providers.settings import Connection


def _check_any(model: str) -> None:
    if not model.strip():
        raise ValueError("model id must not be empty")


# each wire format's class, imported when first asked for (a run's provider, the preflight)
def _openai() -> Any:
    from runner.providers.openai_wire import OpenAIProvider

    return OpenAIProvider


def _anthropic() -> Any:
    from runner.providers.anthropic_wire import AnthropicProvider

    return AnthropicProvider


def _openai_responses() -> Any:
    from runner.providers.openai_responses_wire import OpenAIResponsesProvider

    return OpenAIResponsesProvider


def _azure_openai() -> Any:
    from runner.providers.azure_openai_wire import AzureOpenAIProvider

    return AzureOpenAIProvider


def _gemini() -> Any:
    from runner.providers.gemini_wire import GeminiProvider

    return GeminiProvider


def _bedrock() -> Any:
    from runner.providers.bedrock_wire import BedrockProvider

    return BedrockProvider


def _vertex() -> Any:
    from runner.providers.vertex_wire import VertexProvider

    return VertexProvider


def _callable(connection: Connection, **kw: Any) -> Provider:
    from runner.providers.callable_provider import CallableProvider

    return CallableProvider(connection)


class Registered(NamedTuple):
    """One ``provider:`` name: how to build it, how to check a model id, whether it is built from a
    ``Connection`` (and so runs behind ``ManagedProvider``: limits, remedies, retries) or bare, and for a wire
    format over HTTP its class (``wire()``, imported when first asked for: what the preflight asks with)."""

    factory: Callable[..., Provider]
    check: Callable[[str], None]
    configured: bool = False
    wire: Callable[[], Any] | None = None


def _wire_format(cls_of: Callable[[], Any]) -> Registered:
    """A wire format over HTTP: its provider built from a ``Connection``, its class imported when first used."""
    def factory(connection: Connection, **kw: Any) -> Provider:
        provider: Provider = cls_of()(connection, **kw)
        return provider

    return Registered(factory, _check_any, configured=True, wire=cls_of)


#: provider name → its registration. Later providers register here (``register_provider``).
PROVIDERS: dict[str, Registered] = {
    "openai": _wire_format(_openai),
    "anthropic": _wire_format(_anthropic),
    "openai-responses": _wire_format(_openai_responses),
    "azure-openai": _wire_format(_azure_openai),
    "gemini": _wire_format(_gemini),
    "bedrock": _wire_format(_bedrock),
    "vertex": _wire_format(_vertex),
    "callable": Registered(_callable, _check_any, configured=True),
}


class _Configured(AbstractSet[str]):
    """The registered providers built from a ``Connection``: a live view of ``PROVIDERS``, never a second list."""

    def __contains__(self, name: object) -> bool:
        entry = PROVIDERS.get(name) if isinstance(name, str) else None
        return bool(getattr(entry, "configured", False))  # a bare (factory, check) pair is not configured

    def __iter__(self) -> Iterator[str]:
        return iter([name for name in PROVIDERS if name in self])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"CONFIGURED({sorted(self)})"


#: providers whose factory takes a ``Connection`` (and that run behind ``ManagedProvider``)
CONFIGURED: AbstractSet[str] = _Configured()


def register_provider(name: str, factory: Callable[..., Provider], check: Callable[[str], None], *,
                      configured: bool = False) -> None:
    """Make ``provider: NAME`` usable in sweeps: ``factory()`` builds one (``factory(connection, **kw)`` when
    ``configured``: the model entry's ``base_url``, key, headers and limits apply), ``check(model)`` validates
    a model id."""
    PROVIDERS[name] = Registered(factory, check, configured)


def check_model(provider: str, model: str) -> None:
    """Raise ``ValueError`` with a readable message if ``model`` is not valid for ``provider``."""
    if provider not in PROVIDERS:
        near = difflib.get_close_matches(provider.lower(), PROVIDERS, n=1)
        raise ValueError(f"unknown provider {provider!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                         + f": expected one of {', '.join(sorted(PROVIDERS))}")
    PROVIDERS[provider][1](model)  # by position: a (factory, check) pair registers as well


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
    "Registered",
    "Remedy",
    "check_model",
    "make_provider",
    "register_provider",
]

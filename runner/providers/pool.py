"""The providers of one run: one client per endpoint, one limiter per API key, one remedy book.

A sweep may list several models on one endpoint and key (they must share the
connection pool and, above all, the key's rate limits) and several endpoints. The
pool builds each piece once and hands every model the provider it should call:

- ``sim`` and other in-process providers registered without settings: one bare
  instance per provider name (no wrapper: nothing to limit or retry);
- ``openai``, ``anthropic``, ``callable``: a ``ManagedProvider`` around the
  single-attempt wire provider for the model's ``Connection``, with the limiter of
  its (provider, endpoint, key variable) and the run's ``RemedyBook``.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.providers.base import Provider
from runner.providers.cache import AnswerStore, CachedProvider
from runner.providers.limiter import Limiter, make_limiter
from runner.providers.managed import ManagedProvider
from runner.providers.remedies import Learned, RemedyBook
from runner.providers.settings import DEFAULT_TRANSPORT, Connection, Limits, RetryPolicy


class ProviderPool:
    def __init__(self, *, strict_params: bool = False, on_learn: Callable[[Learned], None] | None = None,
                 transport: str = DEFAULT_TRANSPORT, book: RemedyBook | None = None,
                 limiter_factory: Callable[[tuple[str, str, str], Limits | None], Limiter] | None = None,
                 cache: AnswerStore | None = None) -> None:
        # ``book`` and ``limiter_factory`` let cluster mode share both across worker processes
        # (cluster.remedies / cluster.limiter); by default each is local to this process.
        self.strict_params = strict_params
        self.book = book if book is not None else RemedyBook(on_learn)
        self._limiter_factory = limiter_factory or (lambda key, limits: make_limiter(limits))
        self.transport = transport
        self._plain: dict[str, Provider] = {}
        self._wire: dict[Connection, Provider] = {}
        self._managed: dict[tuple, ManagedProvider] = {}
        self.limiters: dict[tuple[str, str, str], Limiter] = {}
        # the response cache wraps each provider here, once, so no probe can tell a hit from a call
        self.cache = cache
        self._cached: dict[tuple[int, str], CachedProvider] = {}

    def provider(self, name: str, connection: Connection | None = None, *, limits: Limits | None = None,
                 retry: RetryPolicy | None = None, max_connections: int = 1024) -> Provider:
        """The provider a model with these settings calls. ``KeyError`` if its API key is not set."""
        provider = self._uncached(name, connection, limits=limits, retry=retry, max_connections=max_connections)
        if self.cache is None:
            return provider
        endpoint = (connection.base_url or connection.function or name) if connection is not None else name
        key = (id(provider), endpoint)
        cached = self._cached.get(key)
        if cached is None:
            cached = self._cached[key] = CachedProvider(provider, self.cache, endpoint=endpoint,
                                                        strict_params=self.strict_params)
        return cached

    def _uncached(self, name: str, connection: Connection | None, *, limits: Limits | None,
                  retry: RetryPolicy | None, max_connections: int) -> Provider:
        from runner.providers import CONFIGURED, make_provider

        if name not in CONFIGURED:
            if name not in self._plain:
                self._plain[name] = make_provider(name)
            return self._plain[name]
        connection = connection or Connection(name)
        retry = retry or RetryPolicy()
        key = (connection, retry)
        managed = self._managed.get(key)
        if managed is None:
            wire = self._wire.get(connection)
            if wire is None:
                wire = self._wire[connection] = make_provider(name, connection, transport=self.transport,
                                                              max_connections=max_connections)
            limiter = self.limiters.get(connection.limiter_key)
            if limiter is None:
                limiter = self.limiters[connection.limiter_key] = self._limiter_factory(connection.limiter_key, limits)
            endpoint = connection.base_url or connection.function or name
            managed = self._managed[key] = ManagedProvider(wire, endpoint=endpoint, limiter=limiter, book=self.book,
                                                           policy=retry, strict_params=self.strict_params)
        return managed

    @property
    def all(self) -> list[Provider]:
        return [*self._plain.values(), *self._wire.values()]

    async def aclose(self) -> None:
        for provider in self.all:
            await provider.aclose()

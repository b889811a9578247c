"""Provider ``callable``: a user's Python function answers the neutral request.

The sweep names it as ``function: package.module:name``. It takes a ``ChatRequest``
and returns a ``ChatResponse``, either directly (a plain function, run in a worker
thread so a blocking call — an SDK, a local model — does not stall the other
trials) or as an awaitable (an ``async def``, awaited on the event loop). It may
raise ``ProviderError`` to classify its own failures, so the retry wrapper treats
them like any provider's; any other exception is a fatal error of that trial.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from runner.core.types import ChatRequest, ChatResponse
from runner.providers.errors import ErrorKind, ProviderError
from runner.providers.settings import Connection


def load_function(spec: str) -> Callable[[ChatRequest], Any]:
    """Import ``module:function``; ``ValueError`` with a readable reason if it cannot be."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"function {spec!r} must be written 'module:function', e.g. mypkg.agent:respond")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r} for function {spec!r}: {exc}") from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValueError(f"module {module_name!r} has no attribute {attr!r}")
    if not callable(target):
        raise ValueError(f"{spec!r} is not callable")
    return target


class CallableProvider:
    name = "callable"
    accepts_remedies = False  # remedies, if any, are applied to ``request.params`` by the wrapper

    def __init__(self, connection: Connection) -> None:
        assert connection.function is not None
        self.spec = connection.function
        self._fn = load_function(connection.function)
        # an ``async def`` function, or an object whose ``__call__`` is one
        self._is_async = inspect.iscoroutinefunction(self._fn) or inspect.iscoroutinefunction(
            type(self._fn).__call__)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            if self._is_async:
                result = await self._fn(request)
            else:
                result = await asyncio.to_thread(self._fn, request)
                if inspect.isawaitable(result):
                    result = await result
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(ErrorKind.FATAL, f"{self.spec} raised {type(exc).__name__}: {exc}") from None
        if not isinstance(result, ChatResponse):
            raise ProviderError(ErrorKind.FATAL, f"{self.spec} returned {type(result).__name__}, "
                                                 "expected runner.core.types.ChatResponse")
        return result

    async def aclose(self) -> None:
        return None

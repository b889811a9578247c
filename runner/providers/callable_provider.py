"""Provider ``callable``: a user's Python function answers the neutral request.

The sweep names it as ``function: package.module:name``. It takes a ``ChatRequest``
and returns a ``ChatResponse``, either directly (a plain function, run in a worker
thread so a blocking call — an SDK, a local model — does not stall the other
trials) or as an awaitable (an ``async def``, awaited on the event loop). It may
raise ``ProviderError`` to classify its own failures, so the retry wrapper treats
them like any provider's; any other exception is a fatal error of that trial.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable
from typing import Any

from runner.core.types import ChatRequest, ChatResponse
from runner.providers.errors import ErrorKind, ProviderError
from runner.providers.settings import Connection

#: a module name as ``import`` spells it: dotted identifiers, never a file path
_MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
#: per imported module: the sha256 of its file when it was imported, so an edited file is imported afresh
_IMPORTED: dict[str, str] = {}


def load_function(spec: str, folder: str | None = None) -> Callable[[ChatRequest], Any]:
    """Import ``module:function``; ``ValueError`` with a readable reason if it cannot be.

    ``folder`` (the sweep file's folder) is put on the import path first, so a module beside the sweep
    imports without ``PYTHONPATH``. A module whose file changed since it was imported is imported again,
    so an edited agent runs as edited. Whatever the import raises — an exception, or ``sys.exit`` — is
    the reason, never the end of the process.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"function {spec!r} must be written 'module:function', e.g. mypkg.agent:respond")
    if not _MODULE_RE.fullmatch(module_name) or not all(p.isidentifier() for p in attr.split(".")):
        dotted = module_name.removesuffix(".py").replace("\\", "/").strip("./").replace("/", ".")
        raise ValueError(f"function {spec!r} names a file path, not a module: write the module's dotted name "
                         f"(e.g. {dotted or 'agent'}:{attr.split('.')[0] or 'respond'}); the sweep file's folder "
                         "is on the import path")
    if folder is not None and folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        cached = sys.modules.pop(module_name, None)  # so the search below looks at the files, not the cache
        found = importlib.util.find_spec(module_name)
        origin = found.origin if found is not None else None
        digest = _file_sha256(origin)
        if cached is not None and getattr(cached, "__file__", None) == origin and (
                digest is None or _IMPORTED.get(module_name, digest) == digest):
            sys.modules[module_name] = cached  # the same file, unedited: keep the module (and its state)
        module = importlib.import_module(module_name)  # else import what is there now: edited, or another file
        if digest is not None:
            _IMPORTED[module_name] = digest
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r} for function {spec!r}: {exc}") from None
    except (Exception, SystemExit) as exc:  # the module's own code ran and failed (or exited): one line, not the end
        what = f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else f"raised {type(exc).__name__}: {exc}"
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        raise ValueError(f"importing module {module_name!r} for function {spec!r} {what}{where}") from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValueError(f"module {module_name!r} has no attribute {attr!r}")
    if not callable(target):
        raise ValueError(f"{spec!r} is not callable")
    return target


def source_digest(spec: str) -> str | None:
    """The sha256 of the file of an imported ``module:function``'s module (None if it has no file): what the
    sweep's identity holds, so an edited agent is a new run."""
    module = sys.modules.get(spec.partition(":")[0])
    return _file_sha256(getattr(module, "__file__", None))


def _file_sha256(path: str | None) -> str | None:
    if not path or not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class CallableProvider:
    name = "callable"
    accepts_remedies = False  # remedies, if any, are applied to ``request.params`` by the wrapper

    def __init__(self, connection: Connection) -> None:
        assert connection.function is not None
        self.spec = connection.function
        self._fn = load_function(connection.function, connection.function_path)
        # an ``async def`` function, or an object whose ``__call__`` is one
        self._is_async = inspect.iscoroutinefunction(self._fn) or inspect.iscoroutinefunction(
            type(self._fn).__call__)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            if self._is_async:
                result = await self._fn(request)
            else:
                import asyncio  # reading a sweep checks its functions; only a run awaits them

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

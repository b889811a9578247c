"""The remedy book: parameter fixes learned from rejections, per (provider, endpoint, model).

When a server rejects a parameter and says what to do (drop it, rename it, set it),
the retry wrapper records the remedy here; every later request to that model has it
applied before it is sent, so no later call pays for the same rejection. The book
is the run's provenance too: each learned remedy is announced once (the ``on_learn``
callback prints a line and writes it into the manifest) and every row it touched
lists it, because a model measured with a changed parameter is a different
measurement.

Concurrency: many trials of one model start at once, and would all be rejected for
the same parameter before the first rejection came back. So the first request of
each request *shape* (model, parameter names and values, tools present or not) goes
out alone as a scout (``gate``); the others wait until it has been answered without
a parameter rejection, then run concurrently with whatever it learned. A scout that
fails for another reason (rate limit, server error) hands the gate to the next
waiter. Everything here runs on one event loop, and the book's state changes only
in synchronous code, so no two tasks can interleave a read and a write. The Ray
issue can share a book across workers behind the same methods (``learn`` is async
for that reason).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runner.providers.errors import Remedy

__all__ = ["BookKey", "Learned", "RemedyBook", "apply_remedies", "remedy_from_json", "request_shape"]

BookKey = tuple[str, str, str]  # (provider, endpoint, model id)

_MISSING = object()


def apply_remedies(homes: Sequence[dict[str, Any]], remedies: Sequence[Remedy],
                   protected: frozenset[str] = frozenset()) -> list[str]:
    """Apply ``remedies`` in place to the mappings where a request keeps its parameters (``homes``: a wire
    body's top level, or the sections its format nests them in; a provider without a wire body, its neutral
    ``params``), and return the remedies that changed something. A parameter is dropped or renamed in the
    home that holds it; a value is set where it is, else in the first home. ``protected`` names are the
    request's structure, never touched."""
    applied: list[str] = []
    for remedy in remedies:
        param = remedy.param
        if param in protected or not homes:
            continue
        home = next((h for h in homes if param in h), None)
        if remedy.action == "drop" and home is not None:
            del home[param]
        elif remedy.action == "rename" and home is not None and remedy.new_name:
            home[remedy.new_name] = home.pop(param)
        elif remedy.action == "set" and (home or homes[0]).get(param, _MISSING) != remedy.value:
            (home if home is not None else homes[0])[param] = remedy.value
        else:
            continue
        applied.append(remedy.describe())
    return applied


@dataclass(frozen=True)
class Learned:
    """A remedy as the manifest records it."""

    provider: str
    endpoint: str
    model_id: str
    remedy: Remedy
    message: str
    learned_at: str

    def as_json(self) -> dict[str, Any]:
        r = self.remedy
        out: dict[str, Any] = {"provider": self.provider, "endpoint": self.endpoint, "model_id": self.model_id,
                               "action": r.action, "param": r.param, "remedy": r.describe(),
                               "server_message": self.message, "learned_at": self.learned_at}
        if r.action == "rename":
            out["new_name"] = r.new_name
        if r.action == "set":
            out["value"] = r.value
        return out


class RemedyBook:
    def __init__(self, on_learn: Callable[[Learned], None] | None = None) -> None:
        self._by_key: dict[BookKey, dict[str, Remedy]] = {}
        self._frozen: dict[BookKey, tuple[Remedy, ...]] = {}
        self._verified: set[tuple[BookKey, Hashable]] = set()
        self._gates: dict[tuple[BookKey, Hashable], asyncio.Lock] = {}
        self._on_learn = on_learn
        self.learned: list[Learned] = []

    def remedies(self, key: BookKey) -> tuple[Remedy, ...]:
        """Remedies to apply to every request for ``key``, in the order learned."""
        return self._frozen.get(key, ())

    def knows(self, key: BookKey, remedy: Remedy) -> bool:
        return self._by_key.get(key, {}).get(remedy.param) == remedy

    async def learn(self, key: BookKey, remedy: Remedy, message: str) -> bool:
        """Record ``remedy`` for ``key``; True if it is new (and then announced once)."""
        book = self._by_key.setdefault(key, {})
        if book.get(remedy.param) == remedy:
            return False
        book[remedy.param] = remedy
        self._frozen[key] = tuple(book.values())
        learned = Learned(key[0], key[1], key[2], remedy, message,
                          time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.learned.append(learned)
        if self._on_learn is not None:
            self._on_learn(learned)
        return True

    def preload(self, key: BookKey, remedy: Remedy) -> None:
        """Adopt a remedy a previous session of this run learned (resume), without announcing it."""
        book = self._by_key.setdefault(key, {})
        book.setdefault(remedy.param, remedy)
        self._frozen[key] = tuple(book.values())

    # -- the scout gate

    def verified(self, key: BookKey, shape: Hashable) -> bool:
        return (key, shape) in self._verified

    def mark_verified(self, key: BookKey, shape: Hashable) -> None:
        self._verified.add((key, shape))
        self._gates.pop((key, shape), None)

    def gate(self, key: BookKey, shape: Hashable) -> asyncio.Lock:
        lock = self._gates.get((key, shape))
        if lock is None:
            lock = self._gates[(key, shape)] = asyncio.Lock()
        return lock


def request_shape(params: Mapping[str, Any], has_tools: bool, tool_choice: str | None) -> Hashable:
    """What decides whether a server's parameter rules fire: parameter names and values, tools."""
    try:
        items = tuple(sorted((k, repr(v)) for k, v in params.items()))
    except TypeError:
        items = tuple((k, repr(v)) for k, v in params.items())
    return (items, has_tools, tool_choice)


def remedy_from_json(entry: Mapping[str, Any]) -> tuple[BookKey, Remedy] | None:
    """Inverse of ``Learned.as_json`` (for resume); None for an entry this version cannot read."""
    try:
        remedy = Remedy(entry["action"], entry["param"], entry.get("new_name"), entry.get("value"))
        return (entry["provider"], entry["endpoint"], entry["model_id"]), remedy
    except (KeyError, TypeError):
        return None

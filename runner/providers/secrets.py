"""API keys: read from the environment only, and kept out of every text trialgrid writes.

A key is read once, from the variable the sweep names, into a ``Secret`` whose
``repr`` and ``str`` never show it, so a stray log line, a traceback's locals or a
pydantic dump cannot print it. Servers do echo keys back (OpenAI's 401 repeats a
masked key; a misconfigured proxy may repeat it whole, in an answer too), so every
key read is remembered by ``runner.core.redact``, the one scrubber every written
string passes through (answers off the wire, rows, cache, manifest, messages).
"""

from __future__ import annotations

import os

from runner.core import redact


class Secret:
    """An API key that will not print itself."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str) -> None:
        self._value = value
        #: where it came from, safe to print: ``$OPENAI_API_KEY``
        self.source = source
        redact.remember(value)  # scrubbed from everything the process writes, by every provider

    def reveal(self) -> str:
        """The key itself: only for building a request header."""
        return self._value

    def scrub(self, text: str) -> str:
        """``text`` with this key, every other key the process read, and any fragment of one replaced by
        ``[redacted]`` (one scrubber for all: ``runner.core.redact``)."""
        return redact.scrub(text)

    def __repr__(self) -> str:
        return f"Secret({self.source})"

    __str__ = __repr__

    def __reduce__(self) -> tuple:
        # Never let a key travel by pickle (Ray ships objects between processes):
        # the receiving side re-reads it from its own environment.
        return (secret_from_env, (self.source.lstrip("$"),))


def unsendable_key(name: str) -> str | None:
    """Why the key environment variable ``name`` holds cannot be sent (naming only the variable), or None; an unset
    variable is its callers' to say, with their own advice."""
    if any(ord(c) < 32 or ord(c) == 127 for c in os.environ.get(name, "").strip()):  # CR LF would split the header
        return (f"environment variable {name} holds a control character (a line break, a tab...) inside the key: "
                "no server accepts that; export the key alone, on one line")
    return None


def secret_from_env(name: str) -> Secret:
    """The key held by environment variable ``name``; ``KeyError`` naming only the variable if it holds none."""
    value = os.environ.get(name, "").strip()
    if not value:
        raise KeyError(f"environment variable {name} is not set (it should hold the API key)")
    problem = unsendable_key(name)
    if problem is not None:
        raise KeyError(problem)
    return Secret(value, f"${name}")


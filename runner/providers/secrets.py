"""API keys: read from the environment only, and kept out of every text trialgrid writes.

A key is read once, from the variable the sweep names, into a ``Secret`` whose
``repr`` and ``str`` never show it, so a stray log line, a traceback's locals or a
pydantic dump cannot print it. Servers do echo keys back in error bodies (OpenAI's
401 repeats a masked key; a misconfigured proxy may repeat it whole), so every
message built from a response passes through ``Secret.scrub`` before it can reach
a row, the manifest or the terminal.
"""

from __future__ import annotations

import os

_REDACTED = "[redacted]"
# Scrub every run of this many characters of the key found in a text: catches the
# whole key, a masked echo such as ``sk-abc***wxyz`` (its 6-character prefix) and
# partial repeats, while leaving ordinary words alone (keys are high-entropy).
_FRAGMENT = 6


class Secret:
    """An API key that will not print itself."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str) -> None:
        self._value = value
        #: where it came from, safe to print: ``$OPENAI_API_KEY``
        self.source = source

    def reveal(self) -> str:
        """The key itself: only for building a request header."""
        return self._value

    def scrub(self, text: str) -> str:
        """``text`` with the key and any fragment of it replaced by ``[redacted]``."""
        key = self._value
        if not key or not text:
            return text
        if key in text:
            text = text.replace(key, _REDACTED)
        if len(key) >= 2 * _FRAGMENT:
            for i in range(len(key) - _FRAGMENT + 1):
                piece = key[i:i + _FRAGMENT]
                if piece in text:
                    text = text.replace(piece, _REDACTED)
        return text

    def __repr__(self) -> str:
        return f"Secret({self.source})"

    __str__ = __repr__

    def __reduce__(self) -> tuple:
        # Never let a key travel by pickle (Ray ships objects between processes):
        # the receiving side re-reads it from its own environment.
        return (secret_from_env, (self.source.lstrip("$"),))


def secret_from_env(name: str) -> Secret:
    """The key held by environment variable ``name``; ``KeyError`` naming only the variable if unset."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        raise KeyError(f"environment variable {name} is not set (it should hold the API key)")
    return Secret(value.strip(), f"${name}")


def _scrub_all(text: str, secrets: list[Secret] | tuple[Secret, ...]) -> str:
    for secret in secrets:
        text = secret.scrub(text)
    return text

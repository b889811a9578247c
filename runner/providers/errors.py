"""The provider error taxonomy.

A provider classifies every failure once, where it is raised, into one of four
kinds; everything above it (engine retries, rows, reports) reads only the kind.
This follows inspect_ai's pattern of providers that decide their own retry policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from runner.core.errors import TrialgridError


class ErrorKind(str, Enum):
    RATE_LIMITED = "rate_limited"      # retry after the server's pause
    TRANSIENT = "transient"            # retry with backoff (5xx, timeouts, bad bodies)
    REJECTED_PARAM = "rejected_param"  # a parameter was refused; a remedy may fix it
    FATAL = "fatal"                    # auth, not found, other 4xx: do not retry
    TIMEOUT = "timeout"                # the trial exceeded its own deadline (engine)
    INTERNAL = "internal"              # a bug or unexpected exception in trialgrid/probe
    EXPIRED = "expired"                # batch mode: the batch's window closed before this request ran
    CONTEXT_LENGTH = "context_length"  # the request is longer than the model's context: not retried, not a parameter

    @property
    def retryable(self) -> bool:
        return self in (ErrorKind.RATE_LIMITED, ErrorKind.TRANSIENT)


@dataclass(frozen=True, slots=True)
class Remedy:
    """What to do about a rejected parameter: drop it, rename it, or set it."""

    action: str  # "drop" | "rename" | "set"
    param: str
    new_name: str | None = None
    value: Any = None

    def describe(self) -> str:
        """One short phrase, as written on rows and printed: ``drop temperature``."""
        if self.action == "rename":
            return f"rename {self.param} -> {self.new_name}"
        if self.action == "set":
            return f"set {self.param} = {self.value!r}"
        return f"drop {self.param}"


class ProviderError(TrialgridError):
    """A classified provider failure. ``message`` must never contain a secret."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        retry_after_s: float | None = None,
        remedy: Remedy | None = None,
        status_code: int | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after_s = retry_after_s
        self.remedy = remedy
        self.status_code = status_code
        #: the parameter a rejection named, when the body names one (with or without a remedy)
        self.param = param
        #: requests sent for the call that ended in this error (set by the retry wrapper)
        self.attempts = 1
        #: remedies applied to the request that ended in this error (``Remedy.describe()``)
        self.remedies: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"

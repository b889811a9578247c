"""Errors and warnings a person reads: what was wrong, where (file, line, key path), what to do.

Every user-input failure (sweep, case file, catalogue) becomes a ``UserError``; the
CLI prints its one line and exits 2, never a traceback.

Every error trialgrid raises to its caller derives from one root, so a notebook can
catch them all with ``except runner.TrialgridError``; the CLI prints any of them as one
``error:`` line (exit 2)::

    TrialgridError                          runner.core.errors (this module)
    ├── UserError                           bad input, located: sweep, case file, output dir, run mode
    ├── ProviderError (.kind: ErrorKind)    a model call that failed, classified once, where it is raised
    │                                       (runner.providers.classify); .remedy: Remedy for a rejected parameter
    ├── ReplayExhausted                     runner.execution.replay: a stored row cannot be re-scored
    └── WorkersExhausted                    cluster.scheduler: Ray workers kept dying past the replacement budget

``ProviderError``, ``ErrorKind`` and ``Remedy`` are defined here (``runner.providers.errors``
re-exports them for the providers); the two errors drawn with another module are
raised by layers above this one, which this module may not import.

A warning is a ``TrialgridWarning`` (a ``UserWarning``) issued with ``warn``, through the
``warnings`` module: a notebook or script sees it as Python shows any warning, a test can
``pytest.warns`` it, and the CLI turns each into its yellow ``warning:`` line
(``runner.cli.console.warnings_as_lines``). No code prints a ``"warning: ..."`` string of its
own.

Internal control flow, never seen by a caller (deliberately *not* under the root):

- ``Captured`` (runner.execution.backends.batch.capture) is a ``BaseException``: batch
  mode raises it out of a probe to take the request the probe built, and no probe's
  ``except Exception`` may swallow it;
- ``BadRequest`` (runner.sim.serve.codecs) becomes the simulated server's 400 answer;
- ``ToolFailure`` (runner.probes.propagation.toolsim.base) becomes a simulated tool's error result.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import FrameType
from typing import Any

KeyPath = Sequence[str | int]


def _format_key_path(path: KeyPath) -> str:
    """``("probes", 0, "runs")`` → ``probes[0].runs``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<top level>"


class TrialgridError(Exception):
    """The root of every error trialgrid raises to its caller (the tree is in this module's docstring)."""


class UserError(TrialgridError):
    """Bad input, located. ``str()`` is a single line fit to print."""

    def __init__(self, message: str, *, file: Path | str | None = None, line: int | None = None,
                 key_path: KeyPath | None = None, hint: str | None = None) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.key_path = _format_key_path(key_path) if key_path is not None else None
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "")
        if self.key_path:
            where = f"{where} {self.key_path}" if where else self.key_path
        text = f"{where}: {self.message}" if where else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


#: The first words of every error whose request never reached a server (refused, reset, cut off before an
#: answer), as ``runner.providers.http_base`` writes it: the report counts such rows per model as
#: ``unreachable`` and says first when a model's server died (``runner.analysis.completeness``).
CONNECTION_FAILED = "connection failed"


class ErrorKind(str, Enum):
    """What kind of failure a ``ProviderError`` (and an error row's ``error_kind``) is; everything above the
    provider (engine retries, rows, reports) reads only the kind."""

    RATE_LIMITED = "rate_limited"      # retry after the server's pause
    TRANSIENT = "transient"            # retry with backoff (5xx, timeouts, bad bodies)
    REJECTED_PARAM = "rejected_param"  # a parameter was refused; a remedy may fix it
    FATAL = "fatal"                    # auth, not found, other 4xx: do not retry
    TIMEOUT = "timeout"                # the trial exceeded its own deadline (engine)
    INTERNAL = "internal"              # a bug or unexpected exception in trialgrid/probe
    EXPIRED = "expired"                # batch mode: the batch's window closed before this request ran
    CONTEXT_LENGTH = "context_length"  # the request is longer than the model's context: not retried, not a parameter
    CONTENT_FILTER = "content_filter"  # the vendor's content filter refused the prompt or cut the answer: not retried

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
    """A classified provider failure. ``message`` must never contain a secret.

    A provider classifies every failure once, where it is raised (inspect_ai's pattern of
    providers that decide their own retry policy)."""

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


class TrialgridWarning(UserWarning):
    """Something a person should know that does not stop the work: too few runs for a stable rate, a local
    server that will queue, a damaged part set aside, a damaged cache rebuilt. Issued with ``warn``."""


# Shown every time it is issued (a notebook that runs a sweep twice hears its warnings twice), not once per
# line per process as Python's default would: appended, so any filter the user or a test sets comes first.
warnings.filterwarnings("always", category=TrialgridWarning, append=True)

# the folder of the runner package: frames in it are trialgrid's, not the caller's
_RUNNER_DIR = str(Path(__file__).resolve().parents[1]) + os.sep


def warn(message: str) -> None:
    """Issue ``message`` (no ``warning:`` prefix: the CLI adds it) as a ``TrialgridWarning``.

    Python reports a warning at the line that called into trialgrid (the notebook cell or
    script line), not at this call inside it (Python 3.12's ``skip_file_prefixes``, by hand)."""
    level = 1  # warnings.warn's stacklevel 1 is this function's own line
    frame: FrameType | None = sys._getframe(0)
    while frame is not None and frame.f_code.co_filename.startswith(_RUNNER_DIR):
        level, frame = level + 1, frame.f_back
    # every frame is trialgrid's (a worker thread): report the line that warned
    warnings.warn(TrialgridWarning(message), stacklevel=level if frame is not None else 2)

"""Errors a person reads: what was wrong, where (file, line, key path), what to do.

Every user-input failure (sweep, case file, catalogue) becomes a ``UserError``; the
CLI prints its one line and exits 2, never a traceback.

Every error trialgrid raises to its caller derives from one root, so a notebook can
catch them all with ``except runner.TrialgridError``::

    TrialgridError                          runner.core.errors
    ├── UserError                           bad input, located: sweep, case file, output dir, run mode
    ├── ProviderError (.kind: ErrorKind)    runner.providers.errors: a classified model-call failure
    └── ReplayExhausted                     runner.execution.replay: a stored row cannot be re-scored

Internal control flow, never seen by a caller (deliberately *not* under the root):

- ``Captured`` (runner.execution.backends.batch.capture) is a ``BaseException``: batch
  mode raises it out of a probe to take the request the probe built, and no probe's
  ``except Exception`` may swallow it;
- ``BadRequest`` (runner.sim.serve.codecs) becomes the simulated server's 400 answer;
- ``ToolFailure`` (runner.probes.toolsim.base) becomes a simulated tool's error result.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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

"""What trialgrid says as it works, through one channel: Python's ``logging``, logger ``trialgrid``.

Three kinds of message, each with one way out:

- a **progress line** (``say``: "resuming: 1,200 of 2,340 trials already written", "submitted
  batch …") is an INFO record;
- a **note** (``note``: a parameter remedy learned, an MCP server started) is an INFO record
  marked ``record.note = True``: something a person should see even when progress is turned off
  (a level of its own would trip handlers that know only the standard level names);
- a **problem that does not stop the work** (too few runs, a damaged part set aside) is a
  ``TrialgridWarning`` issued through ``warnings`` (``runner.core.errors.warn``), not a record.

A library caller sees no progress or notes unless it configures logging
(``logging.basicConfig(level="INFO")``, or a handler on ``logging.getLogger("trialgrid")``);
the ``trialgrid`` command (and a Ray job's entrypoint) prints progress lines as they are and
notes as ``note:`` lines on stderr, and ``--quiet`` keeps the notes only.
"""

from __future__ import annotations

import logging
from typing import Final

__all__ = ["is_note", "logger", "note", "say"]

logger = logging.getLogger("trialgrid")

_NOTE: Final = {"note": True}


def say(line: str) -> None:
    """A progress line."""
    _emit(line, None)


def note(line: str) -> None:
    """A note a person should see even without progress lines."""
    _emit(line, _NOTE)


def is_note(record: logging.LogRecord) -> bool:
    return bool(getattr(record, "note", False))


def _emit(line: str, extra: dict[str, bool] | None) -> None:
    # a handler someone else installed (on the root logger, say) that raises must not end a trial or a run:
    # what trialgrid says is never worth an answer
    try:
        logger.info(line, extra=extra)
    except Exception:
        pass

"""What trialgrid says while a block runs (``runner.core.messages``), as a list of lines a test can read."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from runner.core.messages import is_note, logger

__all__ = ["heard"]


class _Collect(logging.Handler):
    def __init__(self, lines: list[str], notes: bool) -> None:
        super().__init__(logging.INFO)
        self.lines = lines
        if notes:
            self.addFilter(is_note)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def heard(*, notes: bool = False) -> Iterator[list[str]]:
    """The lines said while the block runs (``notes``: the notes only)."""
    lines: list[str] = []
    handler, before = _Collect(lines, notes), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)

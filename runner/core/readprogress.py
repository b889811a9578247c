"""A progress line now and then while a long file is read: how far, how fast.

Why this exists: ``trialgrid audit`` of a million traces and ``trialgrid import traces`` of a collector's export
take a minute or more, and said nothing until the end. Each tells a ``ReadProgress`` how far it is after a record
(or a chunk of them); a line goes out through ``runner.core.messages`` at most once every ``EVERY_S`` seconds,
never for a read that ends sooner, so a small file says nothing more than before.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from runner.core.messages import say

#: seconds between two progress lines of one read
EVERY_S = 10.0


class ReadProgress:
    """The progress of reading ``path``; ``update`` after each record or chunk."""

    __slots__ = ("_due", "_start", "every", "path", "size", "what")

    def __init__(self, path: Path, what: str, every: float | None = None) -> None:
        self.path, self.what = path, what
        self.every = EVERY_S if every is None else every
        try:
            self.size = os.stat(path).st_size
        except OSError:
            self.size = 0
        self._start = time.monotonic()
        self._due = self._start + self.every

    def update(self, count: int, position: int) -> None:
        """``count`` of ``what`` done so far, the file read up to byte ``position``: a line if one is due."""
        now = time.monotonic()
        if now < self._due:
            return
        self._due = now + self.every
        share = f" ({min(100.0, 100.0 * position / self.size):.0f}% of the file)" if self.size > 0 else ""
        rate = count / max(now - self._start, 1e-9)
        say(f"{self.path}: {count:,} {self.what} so far{share}, {rate:,.0f} a second")

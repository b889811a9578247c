"""Records skipped while reading a user's files: counted by reason, the first few shown, each with where and what.

Why one mechanism: the trace importer (``runner.importers.traces``) and the trace audit
(``runner.probes.phantom.audit``) both read a user's files record by record and skip a bad record instead of
failing. Both count the skips by reason (the counts go into ``import.json`` / ``audit.json``, and "every record
is bad" is read off them) and show the first few as one line each. They differ only in when a line is shown:
the importer says each as it reads (at most a few per reason, then one line saying more were skipped), through
the message channel (``runner.core.messages``), the audit keeps the first few to print at the end, because its
lines are read in worker processes and merged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from runner.core.messages import say
from runner.core.safety import one_line


@dataclass
class Skips:
    """Skipped records by reason, and the lines that say where and what.

    ``live``: each line is said as it comes (a progress line, ``runner.core.messages.say``), at most ``per_reason``
    of a reason (then ``more``, formatted with the reason, once); else the first ``keep`` lines are kept in
    ``lines``."""

    by_reason: Counter[str] = field(default_factory=Counter)
    lines: list[str] = field(default_factory=list)
    keep: int = 20
    live: bool = False
    per_reason: int | None = None
    more: str = ""

    def skip(self, reason: str, line: str | Callable[[], str]) -> None:
        """Count one skipped record; ``line`` (or what it returns: made only when shown) says where and what."""
        self.by_reason[reason] += 1
        n = self.by_reason[reason]
        if self.live:
            if self.per_reason is None or n <= self.per_reason:
                say(one_line(line() if callable(line) else line))
            elif n == self.per_reason + 1 and self.more:
                say(one_line(self.more.format(reason=reason)))
        elif len(self.lines) < self.keep:
            self.lines.append(line() if callable(line) else line)

    def merge(self, other: Skips) -> None:
        """Add another reader's skips (a worker's): the counts summed, its lines kept while there is room."""
        self.by_reason.update(other.by_reason)
        self.lines.extend(other.lines[:max(0, self.keep - len(self.lines))])

    def total(self) -> int:
        return sum(self.by_reason.values())

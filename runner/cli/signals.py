"""SIGTERM stops a run the way Ctrl-C does: flush, finalize the open part, write the manifest.

Schedulers, ``timeout``, ``docker stop`` and ``kill`` send SIGTERM, which Python
otherwise treats like SIGKILL: the process dies at once, the buffered rows are lost,
the part stays an unfinished stream and the manifest says ``running``. While a run
is in progress this module turns SIGTERM into SIGINT — the path that already stops
the engine cleanly (asyncio cancels the trials in flight, the sink closes, the
manifest records the session) — and remembers it, so the command exits 143 (128 +
SIGTERM) rather than 130.

A shell without job control starts a background command (``trialgrid run ... &`` in
a script, a supervisor's pipeline) with SIGINT ignored, and then SIGINT would stop
nothing: the SIGTERM would be swallowed and the run would go on. So within the block
an ignored SIGINT is given Python's default handler (and asyncio its own), and is
ignored again afterwards.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Termination", "sigterm_as_interrupt"]


class Termination:
    """Whether a SIGTERM arrived while the block ran."""

    def __init__(self) -> None:
        self.received = False


@contextmanager
def sigterm_as_interrupt() -> Iterator[Termination]:
    """Within the block, SIGTERM raises the interrupt Ctrl-C would (main thread only)."""
    seen = Termination()

    def on_term(signum: int, frame: FrameType | None) -> None:
        seen.received = True
        signal.raise_signal(signal.SIGINT)

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (an embedding application): leave signals alone
        yield seen
        return
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, previous)
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

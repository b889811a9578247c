"""A ``trialgrid serve`` app on loopback (port 0, a background thread) for as long as a ``with`` block lasts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from runner.sim.serve import ServeOptions, ServerThread


@contextmanager
def serving(**options: Any) -> Iterator[ServerThread]:
    """``with serving(latency_ms=20) as server:`` → a started server on 127.0.0.1, stopped however the block ends."""
    options.setdefault("host", "127.0.0.1")
    options.setdefault("port", 0)
    server = ServerThread(ServeOptions(**options)).start()
    try:
        yield server
    finally:
        server.stop()

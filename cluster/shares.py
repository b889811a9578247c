"""Splitting a whole-run budget (concurrency, model caps) between worker actors.

The sweep states budgets for the whole run; in Ray mode each worker enforces its
share locally, so no call crosses the network for a budget that can be split.
"""

from __future__ import annotations


def share(total: int, parts: int, index: int) -> int:
    """The ``index``-th of ``parts`` near-equal shares of ``total``; the shares sum to ``total``."""
    if parts < 1 or not 0 <= index < parts:
        raise ValueError(f"index {index} out of range for {parts} parts")
    base, extra = divmod(total, parts)
    return base + (1 if index < extra else 0)


def engine_share(total: int, parts: int, index: int) -> int:
    """A worker's share of an engine cap, at least 1 so every worker can run every model.

    Engine caps (``engine.concurrency``, a model's ``concurrency``) are throughput
    knobs, so rounding a zero share up to one is harmless; account limits (a
    provider's ``max_concurrent``, ``rpm``) are never rounded up (see ``limiter``).
    """
    return max(1, share(total, parts, index))
